"""ModelClient: one chat-completions call with the model's defaults, its context limit and retries."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestra_ops.client.affinity import session_header
from orchestra_ops.client.cache import ResponseCache, request_key
from orchestra_ops.client.call_errors import CallError, TransportError
from orchestra_ops.client.callctx import current_role, current_session
from orchestra_ops.client.dp_ranks import rank_headers
from orchestra_ops.client.pool import Outcome, ReplicaPool
from orchestra_ops.client.pricing import Price
from orchestra_ops.client.prompt_size import estimate_prompt_tokens
from orchestra_ops.client.replica import Replica
from orchestra_ops.client.retry import RetryPolicy, is_retryable_status, parse_retry_after
from orchestra_ops.core.error_body import error_message

Message = Mapping[str, Any]
CACHE_REPLICA = "cache"  # the replica a cached answer names (profile.jsonl also marks it "cache": "hit")
log = logging.getLogger(__name__)


@dataclass
class ChatResult:
    content: str | None
    message: dict[str, Any]
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    replica: str
    attempts: int
    latency_s: float


@dataclass(frozen=True)
class CallEvent:
    """One model call as profile.jsonl records it (retries folded into `attempts`).

    `{"type": "model_call", "task": id|null, "role", "model", "replica", "start", "latency",
    "prompt_tokens", "completion_tokens", "attempts", "status"[, "error"][, "cost"]}`; times in seconds.
    `role` is the name the caller asked for (a role, or a model key), `model` the target it resolved to.
    `cost` (USD) only for a priced target (client/pricing.py): 0 for a cache hit or a failed call.
    """

    role: str
    model: str
    replica: str | None
    start: float  # wall clock, seconds since the epoch
    latency_s: float
    prompt_tokens: int | None
    completion_tokens: int | None
    attempts: int
    status: str  # "ok" or the CallError kind
    error: str | None = None
    task: str | int | None = None  # the task (unit of work) that made the call
    cached: bool = False  # answered from the response cache (--cache): no model call was made
    cost_usd: float | None = None  # None: the target has no pricing

    def to_json(self) -> dict[str, Any]:
        return {"type": "model_call", "task": self.task, "role": self.role, "model": self.model,
                "replica": self.replica, "start": round(self.start, 6),
                "latency": round(self.latency_s, 6), "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "attempts": self.attempts,
                "status": self.status, **({"error": self.error} if self.error else {}),
                **({"cache": "hit"} if self.cached else {}),
                **({"cost": round(self.cost_usd, 9)} if self.cost_usd is not None else {})}


@dataclass
class ModelClient:
    """Calls one declared model (or provider) through its pool. Never prints; reports via `on_call`."""

    name: str  # the model or provider key
    served_name: str
    pool: ReplicaPool
    request_timeout_s: float
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    request_defaults: Mapping[str, Any] = field(default_factory=dict)
    max_model_len: int | None = None
    api_key_env: str | None = None
    on_call: Callable[[CallEvent], None] | None = None
    slots: asyncio.Semaphore | None = None  # a cap on this target's calls in flight (None: the pool's caps)
    cache: ResponseCache | None = None  # --cache: answered requests replayed from SQLite (None: off)
    identity: str | None = None  # what the served name stands for (identity.py), part of every cache key
    price: Price | None = None  # the target's pricing: each call's cost goes into its event
    dp_ranks: int = 1  # vLLM internal DP ranks behind each endpoint: a session's calls pin one (dp_ranks.py)

    async def chat(self, messages: Sequence[Message], *, role: str = "", task: str | int | None = None,
                   session: str | None = None, **params: Any) -> ChatResult:
        """POST /chat/completions; retry what can succeed next time; raise CallError otherwise.

        `session`: the call's session key (default: the `current_session` of the calling context);
        with the pool's affinity on, it picks the replica and is sent as `x-session-id`.
        """
        if session is None:
            session = current_session.get()
        if self.slots is not None:
            async with self.slots:
                return await self._timed_chat(messages, role, task, session, params)
        return await self._timed_chat(messages, role, task, session, params)

    async def _timed_chat(self, messages: Sequence[Message], role: str, task: str | int | None,
                          session: str | None, params: Mapping[str, Any]) -> ChatResult:
        start_wall, start = time.time(), time.monotonic()
        token = current_role.set(role or self.name)  # what a stall report says this task waits on
        try:
            result = await self._chat(list(messages), params, session)
        except CallError as exc:
            self._report(role, task, start_wall, start, None, exc.attempts, exc.kind, exc.message, exc.replica)
            raise
        finally:
            current_role.reset(token)
        self._report(role, task, start_wall, start, result, result.attempts, "ok", None, result.replica,
                     cached=result.attempts == 0)
        return result

    def _report(self, role: str, task: str | int | None, start_wall: float, start: float,
                result: ChatResult | None, attempts: int, status: str, error: str | None,
                replica: str | None, *, cached: bool = False) -> None:
        if self.on_call is None:
            return
        cost = None
        if self.price is not None:
            cost = 0.0 if result is None or cached else self.price.cost(result.prompt_tokens, result.completion_tokens)
        self.on_call(CallEvent(role=role, model=self.name, replica=replica, start=start_wall,
                               latency_s=time.monotonic() - start,
                               prompt_tokens=result.prompt_tokens if result else None,
                               completion_tokens=result.completion_tokens if result else None,
                               attempts=attempts, status=status, error=error, task=task, cached=cached,
                               cost_usd=cost))

    def build_body(self, messages: list[Message], params: Mapping[str, Any]) -> dict[str, Any]:
        """request_defaults, then the caller's params (nested dicts merged), then model and messages."""
        body: dict[str, Any] = {k: (dict(v) if isinstance(v, Mapping) else v)
                                for k, v in self.request_defaults.items()}
        for key, value in params.items():
            if isinstance(value, Mapping) and isinstance(body.get(key), dict):
                body[key] = {**body[key], **value}
            else:
                body[key] = value
        body["model"] = self.served_name
        body["messages"] = messages
        self._fit_context(body)
        return body

    def _fit_context(self, body: dict[str, Any]) -> None:
        limit = self.max_model_len
        if limit is None:
            return
        prompt = estimate_prompt_tokens(body["messages"], body.get("tools"))
        if prompt >= limit:
            raise CallError("prompt_too_long",
                            f"the prompt is about {prompt} tokens, {prompt - limit + 1} over what "
                            f"'{self.name}' can take (max_model_len {limit}, leaving room for 1 output "
                            "token); shorten it or serve the model with a longer context")
        key = "max_completion_tokens" if "max_completion_tokens" in body else "max_tokens"
        wanted = body.get(key)
        if isinstance(wanted, int) and prompt + wanted > limit:
            body[key] = limit - prompt  # vLLM refuses prompt + max_tokens > max_model_len with a 400

    def _headers(self, session: str | None) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if session is not None and self.pool.sessions is not None:
            headers["x-session-id"] = session_header(session)  # a router in front keeps the same affinity
            headers.update(rank_headers(self.dp_ranks, session))  # and vLLM's internal DP keeps it on one rank
        if self.api_key_env is not None:
            key = os.environ.get(self.api_key_env)  # read at call time; never stored or logged
            if not key:
                raise CallError("missing_api_key", f"'{self.name}' reads its key from ${self.api_key_env}, "
                                "which is not set")
            headers["Authorization"] = f"Bearer {key}"
        return headers

    async def _chat(self, messages: list[Message], params: Mapping[str, Any], session: str | None) -> ChatResult:
        body = self.build_body(messages, params)
        payload = json.dumps(body).encode()
        key = None
        if self.cache is not None and self.cache.cacheable(body):
            key = request_key(body, self.identity)
            cached = self.cache.get(key)
            if cached is not None:
                try:
                    return self._parse(cached, CACHE_REPLICA, 0, 0.0)
                except CallError as exc:  # a damaged page handed back garbage: ask the model instead
                    self.cache.turn_off("a read", exc.message)
        attempts = self.retry.attempts
        last: CallError | None = None
        previous: Replica | None = None
        for attempt in range(1, attempts + 1):
            headers = self._headers(session)
            replica = await self.pool.acquire(avoid=previous, session=session)
            previous = replica
            outcome: Outcome = "busy"  # neutral unless set below: a cancelled call says nothing of the replica
            retry_after: float | None = None
            sent = time.monotonic()
            try:
                resp = await self.pool.transport.post(replica, replica.chat_url, payload, headers,
                                                      self.request_timeout_s)
            except TransportError as exc:
                outcome = "down" if exc.kind == "connection" else "fail"
                last = CallError(exc.kind, exc.message, attempts=attempt, replica=replica.address)
            else:
                if resp.status == 200:
                    outcome = "ok"
                    result = self._parse(resp.body, replica, attempt, time.monotonic() - sent)
                    if key is not None:
                        self._store(key, resp.body)
                    return result
                error = error_message(resp.body)
                if not is_retryable_status(resp.status):
                    outcome = "ok"  # the replica is fine; the request is not
                    raise CallError(_kind_for(resp.status, error), f"{replica.address} answered "
                                    f"{resp.status}: {error}", attempts=attempt, replica=replica.address)
                outcome = "busy" if resp.status == 429 else "fail"
                retry_after = parse_retry_after(resp.headers)
                last = CallError(f"http_{resp.status}", f"{replica.address} answered {resp.status}: {error}",
                                 attempts=attempt, replica=replica.address)
            finally:
                self.pool.release(replica, outcome, "" if outcome == "ok" else (last.message if last else ""))
            if attempt < attempts:
                await asyncio.sleep(self.retry.delay(attempt, retry_after))
        assert last is not None
        raise CallError(last.kind, f"{last.message} (gave up after {attempts} attempt(s))",
                        attempts=attempts, replica=last.replica)

    def _store(self, key: str, body: bytes) -> None:
        assert self.cache is not None
        self.cache.put(key, self.served_name, body)  # a failure turns the cache off; the answer stands

    def _parse(self, body: bytes, replica: Replica | str, attempt: int, latency: float) -> ChatResult:
        address = replica if isinstance(replica, str) else replica.address
        try:
            data = json.loads(body)
            choice = data["choices"][0]
            message = dict(choice["message"])
        except (ValueError, KeyError, IndexError, TypeError):
            raise CallError("bad_response", f"{address}: not a chat completion: {body[:200]!r}",
                            attempts=attempt, replica=address) from None
        usage = data.get("usage") or {}
        return ChatResult(content=message.get("content"), message=message,
                          finish_reason=choice.get("finish_reason"),
                          prompt_tokens=usage.get("prompt_tokens"), completion_tokens=usage.get("completion_tokens"),
                          replica=address, attempts=attempt, latency_s=latency)


def _kind_for(status: int, message: str) -> str:
    if status == 400 and "context length" in message.lower():
        return "context_length"
    return f"http_{status}"
