"""The chat call against a scripted in-process HTTP server: retries, 400s, timeouts, defaults, context."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiohttp import web

from orchestra_ops.client.call_errors import CallError
from orchestra_ops.client.chat import CallEvent, ModelClient
from orchestra_ops.client.pool import ReplicaPool
from orchestra_ops.client.replica import Replica
from orchestra_ops.client.retry import RetryPolicy, parse_retry_after
from orchestra_ops.client.transport import AiohttpTransport
from tests.webapp import serve_app

FAST = RetryPolicy(attempts=3, backoff_base_s=0.01, backoff_max_s=0.02)
OK = {"choices": [{"message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
      "usage": {"prompt_tokens": 3, "completion_tokens": 1}}

Script = list[tuple[int, Any, dict[str, str]] | str]


class Scripted:
    """Answers chat requests from a script: (status, body, headers) or "hang"; then 200s."""

    def __init__(self, script: Script) -> None:
        self.script = list(script)
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.health = 200

    async def chat(self, request: web.Request) -> web.StreamResponse:
        self.bodies.append(await request.json())
        self.headers.append(dict(request.headers))
        step = self.script.pop(0) if self.script else (200, OK, {})
        if step == "hang":
            await asyncio.sleep(3600)
        assert not isinstance(step, str)
        status, body, headers = step
        return web.json_response(body, status=status, headers=headers)

    async def health_check(self, request: web.Request) -> web.Response:
        return web.Response(status=self.health)


@contextlib.asynccontextmanager
async def serve(script: Script) -> AsyncIterator[tuple[Scripted, int]]:
    scripted = Scripted(script)
    app = web.Application()
    app.router.add_post("/v1/chat/completions", scripted.chat)
    app.router.add_get("/health", scripted.health_check)
    async with serve_app(app) as port:
        yield scripted, port


def make_client(ports: list[int], **kwargs: Any) -> ModelClient:
    transport = AiohttpTransport()
    pool = ReplicaPool("m", [Replica.for_server("127.0.0.1", p, 8) for p in ports], transport,
                       unavailable_wait_s=kwargs.pop("unavailable_wait_s", 1.0), probe_interval_s=0.05)
    return ModelClient(name="m", served_name="served-m", pool=pool, request_timeout_s=kwargs.pop("timeout", 5.0),
                       retry=kwargs.pop("retry", FAST), **kwargs)


def run(coro_fn: Callable[[], Any]) -> Any:
    return asyncio.run(coro_fn())


def test_5xx_and_429_are_retried_until_ok() -> None:
    async def main() -> None:
        script: Script = [(500, {"message": "boom"}, {}), (429, {"message": "slow"}, {"Retry-After": "0"})]
        async with serve(script) as (s, port):
            client = make_client([port])
            result = await client.chat([{"role": "user", "content": "q"}])
            await client.pool.close()
            await client.pool.transport.close()
            assert result.content == "hi" and result.attempts == 3
            assert len(s.bodies) == 3
    run(main)


def test_400_is_not_retried_and_keeps_the_servers_message() -> None:
    message = "This model's maximum context length is 64 tokens. However, you requested 90 tokens"
    async def main() -> None:
        async with serve([(400, {"object": "error", "message": message, "code": 400}, {})]) as (s, port):
            client = make_client([port])
            with pytest.raises(CallError) as info:
                await client.chat([{"role": "user", "content": "q"}])
            await client.pool.transport.close()
            assert info.value.kind == "context_length"
            assert message in info.value.message
            assert info.value.attempts == 1 and len(s.bodies) == 1
    run(main)


def test_other_4xx_is_not_retried() -> None:
    async def main() -> None:
        async with serve([(404, {"error": {"message": "no such model"}}, {})]) as (s, port):
            client = make_client([port])
            with pytest.raises(CallError) as info:
                await client.chat([{"role": "user", "content": "q"}])
            await client.pool.transport.close()
            assert info.value.kind == "http_404" and "no such model" in info.value.message
            assert len(s.bodies) == 1
    run(main)


def test_attempts_are_bounded() -> None:
    async def main() -> None:
        async with serve([(503, {"message": "down"}, {})] * 10) as (s, port):
            client = make_client([port], retry=RetryPolicy(attempts=2, backoff_base_s=0.01))
            with pytest.raises(CallError) as info:
                await client.chat([{"role": "user", "content": "q"}])
            await client.pool.transport.close()
            assert info.value.kind == "http_503" and info.value.attempts == 2
            assert "gave up after 2 attempt(s)" in info.value.message
            assert len(s.bodies) == 2
    run(main)


def test_a_hanging_request_times_out_and_is_retried() -> None:
    async def main() -> None:
        async with serve(["hang"]) as (_, port):
            client = make_client([port], timeout=0.3)
            result = await client.chat([{"role": "user", "content": "q"}])
            await client.pool.close()
            await client.pool.transport.close()
            assert result.attempts == 2
    run(main)


def test_request_defaults_are_merged_and_the_served_name_used() -> None:
    async def main() -> None:
        async with serve([]) as (s, port):
            client = make_client([port], request_defaults={"temperature": 0.0,
                                                           "chat_template_kwargs": {"enable_thinking": False}})
            await client.chat([{"role": "user", "content": "q"}], max_tokens=5,
                              chat_template_kwargs={"other": 1})
            await client.pool.transport.close()
            body = s.bodies[0]
            assert body["model"] == "served-m" and body["temperature"] == 0.0 and body["max_tokens"] == 5
            assert body["chat_template_kwargs"] == {"enable_thinking": False, "other": 1}
    run(main)


def test_a_prompt_over_max_model_len_is_refused_before_any_request() -> None:
    async def main() -> None:
        async with serve([]) as (s, port):
            client = make_client([port], max_model_len=100)
            with pytest.raises(CallError) as info:
                await client.chat([{"role": "user", "content": "x" * 800}])  # 200 + 4 tokens
            assert info.value.kind == "prompt_too_long"
            assert "about 204 tokens, 105 over" in info.value.message
            await client.chat([{"role": "user", "content": "x" * 200}], max_tokens=500)  # 54 tokens: fits
            await client.pool.transport.close()
            assert len(s.bodies) == 1 and s.bodies[0]["max_tokens"] == 100 - 54  # clamped to what fits
    run(main)


def test_profile_event_per_call() -> None:
    events: list[CallEvent] = []

    async def main() -> None:
        async with serve([(500, {"message": "boom"}, {})]) as (_, port):
            client = make_client([port], on_call=events.append)
            await client.chat([{"role": "user", "content": "q"}], role="answer")
            await client.pool.close()
            await client.pool.transport.close()
    run(main)
    (event,) = events
    assert event.role == "answer" and event.model == "m" and event.attempts == 2 and event.status == "ok"
    assert event.prompt_tokens == 3 and event.completion_tokens == 1
    assert json.loads(json.dumps(event.to_json()))["replica"].startswith("127.0.0.1:")


def test_retry_policy_backoff_and_retry_after() -> None:
    policy = RetryPolicy(attempts=5, backoff_base_s=1, backoff_max_s=4)
    delays = [policy.delay(n) for n in range(1, 5)]
    assert 0.5 <= delays[0] <= 1 and 1 <= delays[1] <= 2 and 2 <= delays[2] <= 4 and 2 <= delays[3] <= 4
    assert policy.delay(1, retry_after=7) == 7
    assert parse_retry_after({"Retry-After": "2"}) == 2.0
    assert parse_retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) is None


def test_cancelled_calls_do_not_eject_the_replica() -> None:
    """A task deadline cancels calls in flight; that says nothing about the replica's health."""
    async def main() -> None:
        async with serve(["hang"] * 5) as (_, port):
            client = make_client([port], timeout=60)
            for _ in range(5):
                with pytest.raises(asyncio.TimeoutError):
                    await asyncio.wait_for(client.chat([{"role": "user", "content": "q"}]), timeout=0.1)
            replica = client.pool.replicas[0]
            assert replica.healthy and replica.consecutive_failures == 0 and replica.outstanding == 0
            await client.pool.close()
            await client.pool.transport.close()
    run(main)
