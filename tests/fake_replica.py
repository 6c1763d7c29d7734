"""FakeReplica: an OpenAI-shaped server in a thread of the test process that records every request
(path, headers, JSON body) and answers as told, for what a sim does not do on purpose: cut a stream
after N chunks, close the connection before answering, or stand in for an external provider.

    with FakeReplica(mode="cut_stream", chunks_before_cut=2) as replica:
        ... a gateway over replica.port ...
        assert len(replica.requests) == 1

Modes: "ok" (a chat completion naming the body's model; a stream of 3 content chunks + [DONE]),
"cut_stream" (a stream: `chunks_before_cut` chunks, then the connection is closed mid-body),
"drop" (the connection closed before any byte of the answer).
"""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from aiohttp import web

from tests.helpers import free_port


@dataclass(frozen=True)
class Seen:
    path: str
    headers: dict[str, str]
    body: Any


def completion(model: str, content: str) -> dict[str, Any]:
    return {"id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}


def chunk(model: str, content: str) -> bytes:
    body = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0, "model": model,
            "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": None}]}
    return f"data: {json.dumps(body)}\n\n".encode()


class FakeReplica:
    def __init__(self, mode: str = "ok", *, chunks_before_cut: int = 2, content: str = "fake answer") -> None:
        self.mode = mode
        self.chunks_before_cut = chunks_before_cut
        self.content = content
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.requests: list[Seen] = []
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(Seen(request.path, {k.lower(): v for k, v in request.headers.items()}, body))
        model = str(body.get("model"))
        if self.mode == "drop":
            assert request.transport is not None
            request.transport.close()
            return web.Response(status=500)
        if not body.get("stream"):
            return web.json_response(completion(model, self.content))
        response = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await response.prepare(request)
        pieces = ["fake ", "answer ", "here"]
        for index, piece in enumerate(pieces):
            if self.mode == "cut_stream" and index == self.chunks_before_cut:
                await asyncio.sleep(0.05)
                assert request.transport is not None
                request.transport.close()  # mid-body: no terminating chunk
                return response
            await response.write(chunk(model, piece))
            await asyncio.sleep(0.01)
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(status=200)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._serve())

    async def _serve(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/chat/completions", self._chat)  # a provider's base URL ends in /v1 or not
        app.router.add_get("/health", self._health)
        runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=0.5)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", self.port)
        await site.start()
        self._stop = asyncio.Event()
        self._ready.set()
        await self._stop.wait()
        await runner.cleanup()

    def __enter__(self) -> FakeReplica:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the fake replica did not start")
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)
