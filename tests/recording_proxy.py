"""RecordingProxy: a real HTTP reverse proxy on 127.0.0.1 that keeps every request it forwards.

    with RecordingProxy("http://127.0.0.1:8765") as proxy:
        ... point a client at proxy.url ...
        assert all(len(body["queries"][0]) <= 390 for _, body in proxy.posts("/retrieve"))

It runs an aiohttp server in its own thread and event loop and forwards method, path, headers and
body unchanged to the upstream, answering with the upstream's status and body. Used where a test
must see every request a component really sent (the retrieval payload, the orchestrator prompts).
"""

from __future__ import annotations

import asyncio
import json
import threading
from types import TracebackType
from typing import Any

import aiohttp
from aiohttp import web

from tests.helpers import free_port


class RecordingProxy:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.requests: list[tuple[str, str, bytes]] = []  # (method, path, body)
        self.headers: list[dict[str, str]] = []  # the headers of each request, beside `requests`
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def posts(self, path: str) -> list[tuple[str, Any]]:
        """(path, parsed JSON body) of every POST to `path` so far."""
        with self._lock:
            return [(p, json.loads(b)) for m, p, b in self.requests if m == "POST" and p == path]

    def posts_with_headers(self, path: str) -> list[tuple[dict[str, str], Any]]:
        """(headers with lower-case names, parsed JSON body) of every POST to `path` so far, in arrival order."""
        with self._lock:
            return [(h, json.loads(b)) for (m, p, b), h in zip(self.requests, self.headers, strict=True)
                    if m == "POST" and p == path]

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        with self._lock:
            self.requests.append((request.method, request.path, body))
            self.headers.append({k.lower(): v for k, v in request.headers.items()})
        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() in ("content-type",)}
        async with self._session.request(request.method, self.upstream + request.path_qs, data=body,
                                         headers=headers) as resp:
            payload = await resp.read()
            return web.Response(status=resp.status, body=payload,
                                content_type=resp.content_type or "application/json")

    async def _main(self) -> None:
        # a new upstream connection per request: a pooled one the upstream closes when idle (uvicorn after 5 s)
        # would fail the request that reuses it at that moment (ServerDisconnectedError), and the retry would be
        # recorded twice
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600),
                                              connector=aiohttp.TCPConnector(force_close=True))
        app = web.Application(client_max_size=256 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", self.port).start()
        self._stop = asyncio.Event()
        self._ready.set()
        await self._stop.wait()
        await runner.cleanup()
        await self._session.close()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._main())

    def __enter__(self) -> RecordingProxy:
        self._session: aiohttp.ClientSession | None = None
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("the recording proxy did not start")
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=30)
