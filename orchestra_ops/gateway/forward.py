"""Forwarding one inference request to a replica of its target, retried only before the client got a byte.

The engine's rules (DESIGN section 7, client/retry.py): 429, 408, 5xx, a refused or cut
connection and a timeout retry on another replica (bounded attempts, backoff with jitter,
Retry-After honoured); any other status (a 400 above all) is the answer and goes to the client as
the replica gave it. A streamed answer is committed to the client with its first body bytes; from
then on nothing is retried: a replica that cuts the stream cuts the client's stream too (the
connection closes without the terminating chunk), and the request counts as a `stream_cut` error.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from orchestra_ops.client.call_errors import CallError, TransportError
from orchestra_ops.client.pool import Outcome, ReplicaPool
from orchestra_ops.client.replica import Replica
from orchestra_ops.client.retry import RetryPolicy, is_retryable_status, parse_retry_after
from orchestra_ops.core.error_body import error_message
from orchestra_ops.gateway.server import Reply
from orchestra_ops.gateway.upstream import Answer, StreamCut, Upstreams

HOP_BY_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "content-length", "te", "trailer",
                        "upgrade", "proxy-authenticate", "proxy-connection", "server", "date"})


@dataclass(slots=True)
class Forwarded:
    """What happened to one forwarded request (the request log and /metrics are written from it)."""

    status: str = "ok"  # "ok" or an error kind
    code: str = ""  # the HTTP status the client got ("" when it got none)
    replica: str | None = None
    attempts: int = 0
    error: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    body: bytes | None = None  # a whole 200 answer (what --cache stores)
    delivered: bool = False  # a stream's `data: [DONE]` reached the client (it may close before the last chunk)


@dataclass(slots=True)
class Call:
    """One request as it goes to the replicas: path under the replica's base URL, body, headers."""

    path: str  # "/v1/chat/completions", "/tokenize" …
    body: bytes
    headers: Mapping[str, str]
    stream: bool
    session: str | None


def error_body(message: str, kind: str = "gateway_error", code: int | None = None) -> bytes:
    return json.dumps({"error": {"message": message, "type": kind, "param": None, "code": code}}).encode()


def answer_headers(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(k, v) for k, v in headers if k.lower() not in HOP_BY_HOP]


_PROMPT_TOKENS = re.compile(rb'"prompt_tokens"\s*:\s*(\d+)')
_COMPLETION_TOKENS = re.compile(rb'"completion_tokens"\s*:\s*(\d+)')


def usage_of(body: bytes) -> tuple[int | None, int | None]:
    """(prompt_tokens, completion_tokens) of an answer's last `"usage": {…}` object, when it has one
    (read with two regular expressions from where it starts: a JSON parse of every answer costs more)."""
    at = body.rfind(b'"usage"')
    if at < 0:
        return None, None
    prompt, completion = _PROMPT_TOKENS.search(body, at), _COMPLETION_TOKENS.search(body, at)
    return (int(prompt.group(1)) if prompt else None, int(completion.group(1)) if completion else None)


class Forwarder:
    def __init__(self, upstreams: Upstreams, retry: RetryPolicy, timeout_s: float) -> None:
        self.upstreams = upstreams
        self.retry = retry
        self.timeout_s = timeout_s

    async def forward(self, pool: ReplicaPool, base: Mapping[int, str], call: Call, reply: Reply,
                      timeout_s: float | None = None, done: Forwarded | None = None) -> Forwarded:
        """Send `call` to a replica of `pool` (`base`: id(replica) -> its base URL) and answer `reply`.
        `timeout_s` bounds each attempt (default: the gateway's request timeout); `done` is filled in as
        it goes (what a caller whose request is cancelled still knows) and returned."""
        done = done if done is not None else Forwarded()
        timeout = timeout_s or self.timeout_s
        previous: Replica | None = None
        last: tuple[int, list[tuple[str, str]], bytes] | None = None  # the last retryable answer
        for attempt in range(1, self.retry.attempts + 1):
            done.attempts = attempt
            try:
                replica = await pool.acquire(previous, session=call.session)
            except CallError as exc:
                return self._fail(reply, done, exc.kind, exc.message, 503)
            previous = replica
            done.replica = replica.address
            health: Outcome = "busy"  # a cancelled request says nothing about the replica
            retry_after: float | None = None
            answer: Answer | None = None
            kind, error = "", ""
            try:
                async with asyncio.timeout(timeout):
                    answer = await self.upstreams.open(base[id(replica)] + call.path, "POST", call.headers,
                                                       call.body, replica.address)
                    status, headers = answer.status, answer.headers
                    if call.stream and status == 200:
                        opened, answer = answer, None
                        await self._stream(opened, reply, done)  # closes or releases it
                        health = "ok"
                        return done
                    body = await answer.read()
                answer.release()
                answer = None
            except TimeoutError:
                health, kind, error = "fail", "timeout", f"no answer from {replica.address} within {timeout:g} s"
                if reply.started:  # a stream that outlived the timeout: cut, never retried
                    reply.abort()
                    return self._record(done, kind, f"{replica.address}: the stream outlived the {timeout:g} s "
                                        "request timeout")
            except TransportError as exc:
                health, kind, error = "down", exc.kind, exc.message
            except StreamCut as exc:
                health, kind, error = "fail", "connection", f"{replica.address}: {exc}"
                if reply.started:  # bytes reached the client: never retried
                    reply.abort()
                    return self._record(done, "stream_cut", error)
            else:
                if not is_retryable_status(status):
                    health = "ok"  # the replica is fine; its answer is the answer (a 400 too)
                    return self._pass(reply, done, status, headers, body)
                health = "busy" if status == 429 else "fail"
                retry_after = parse_retry_after(dict(headers))
                last = (status, headers, body)
                kind, error = f"http_{status}", f"{replica.address} answered {status}: {error_message(body)}"
            finally:
                if answer is not None:  # not read to its end: the connection cannot be reused
                    answer.close()
                pool.release(replica, health, error)
            done.status, done.error = kind, error
            if attempt < self.retry.attempts:
                await asyncio.sleep(self.retry.delay(attempt, retry_after))
        if last is not None:  # every attempt answered a retryable status: the client gets the last one
            status, headers, body = last
            done.code = str(status)
            reply.send(status, answer_headers(headers), body)
            return done
        return self._fail(reply, done, done.status, done.error or "failed", 504 if done.status == "timeout" else 502)

    def _pass(self, reply: Reply, done: Forwarded, status: int, headers: list[tuple[str, str]],
              body: bytes) -> Forwarded:
        done.code = str(status)
        if status == 200:
            done.status, done.error = "ok", None
            done.prompt_tokens, done.completion_tokens = usage_of(body)
            done.body = body
        else:
            done.status, done.error = f"http_{status}", error_message(body)
        reply.send(status, answer_headers(headers), body)
        return done

    async def _stream(self, answer: Answer, reply: Reply, outcome: Forwarded) -> None:
        """Pass a 200 stream through as it comes; the first body bytes commit it (see the module doc)."""
        chunks = answer.chunks()
        try:
            first = await chunks.__anext__()
        except StopAsyncIteration:
            first = b""
        except BaseException:
            answer.close()
            raise
        reply.start(200, answer_headers(answer.headers))
        outcome.code, outcome.status, outcome.error = "200", "ok", None  # a cut later says otherwise
        usage_chunk = first if b'"usage"' in first else b""
        try:
            await reply.write(first)
            last = first
            async for chunk in chunks:
                if b'"usage"' in chunk:
                    usage_chunk = chunk
                outcome.delivered = False
                await reply.write(chunk)
                last = chunk
                outcome.delivered = last.rstrip().endswith(b"data: [DONE]")
            outcome.delivered = last.rstrip().endswith(b"data: [DONE]")
        except BaseException:
            answer.close()
            raise
        answer.release()
        reply.end()
        if usage_chunk:
            outcome.prompt_tokens, outcome.completion_tokens = usage_of(usage_chunk)

    @staticmethod
    def _record(outcome: Forwarded, kind: str, message: str) -> Forwarded:
        outcome.status, outcome.error = kind, message
        return outcome

    @staticmethod
    def _fail(reply: Reply, outcome: Forwarded, kind: str, message: str, status: int) -> Forwarded:
        outcome.status, outcome.error, outcome.code = kind, message, str(status)
        reply.send(status, [("content-type", "application/json")], error_body(message, kind, status))
        return outcome




def json_object(body: bytes) -> dict[str, Any] | None:
    try:
        data = json.loads(body)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None
