"""A small HTTP/1.1 server: asyncio.Protocol + httptools (llhttp), one handler coroutine per request.

Why not aiohttp.web or uvicorn: the gateway's own CPU per request is what keeps it near
direct-to-pool speed on a busy machine, and a general server spends most of it in its request,
response and header objects (bench/bench_gateway.py measures the stacks side by side). This module
does what the gateway needs and nothing else: keep-alive, pipelined requests answered in order,
`Expect: 100-continue`, chunked or sized request bodies (bounded), a whole response with
Content-Length, or a streamed one (chunked transfer encoding, written as it comes, with the
transport's flow control). A streamed response cut short is ended by closing the connection
without the terminating chunk, so the client sees an incomplete body, never a complete one.
A client that goes away cancels its handler (and with it the upstream request).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from http import HTTPStatus
from typing import cast

import httptools

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 64 * 1024 * 1024
IDLE_TIMEOUT_S = 75.0  # an idle keep-alive connection is closed after this long
Headers = list[tuple[str, str]]


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


_STATUS_LINES: dict[int, bytes] = {}


def status_line(status: int) -> bytes:
    line = _STATUS_LINES.get(status)
    if line is None:
        line = _STATUS_LINES[status] = f"HTTP/1.1 {status} {_reason(status)}\r\n".encode("latin-1")
    return line


class Request:
    """One parsed request. Header names are lower case; a repeated header keeps its values joined by ', '."""

    __slots__ = ("body", "headers", "keep_alive", "method", "path", "query")

    def __init__(self, method: str, target: bytes, headers: dict[str, str], body: bytes, keep_alive: bool) -> None:
        self.method = method
        path, _, query = target.partition(b"?")
        self.path = path.decode("latin-1")
        self.query = query.decode("latin-1")
        self.headers = headers
        self.body = body
        self.keep_alive = keep_alive


class Reply:
    """The answer to one request: `send` a whole response, or `start` + `write`… + `end` a stream."""

    __slots__ = ("_conn", "_keep_alive", "done", "started", "status")

    def __init__(self, conn: ServerConnection, keep_alive: bool) -> None:
        self._conn = conn
        self._keep_alive = keep_alive
        self.started = False  # a byte of the answer went to the client
        self.done = False
        self.status = 0

    @property
    def disconnected(self) -> bool:
        return self._conn.closed

    def send(self, status: int, headers: Iterable[tuple[str, str]], body: bytes) -> None:
        if self.started:
            raise RuntimeError("the response has already started")
        self.started = self.done = True
        self.status = status
        parts = [status_line(status)]
        parts.extend(f"{name}: {value}\r\n".encode("latin-1") for name, value in headers)
        if not self._keep_alive:
            parts.append(b"connection: close\r\n")
        parts.append(b"content-length: %d\r\n\r\n" % len(body))
        parts.append(body)
        self._conn.write(b"".join(parts))
        self._conn.response_done(self._keep_alive)

    def start(self, status: int, headers: Iterable[tuple[str, str]]) -> None:
        """The head of a streamed (chunked) response; nothing is written until the first chunk or `end`."""
        if self.started:
            raise RuntimeError("the response has already started")
        self.started = True
        self.status = status
        parts = [status_line(status)]
        parts.extend(f"{name}: {value}\r\n".encode("latin-1") for name, value in headers)
        if not self._keep_alive:
            parts.append(b"connection: close\r\n")
        parts.append(b"transfer-encoding: chunked\r\n\r\n")
        self._conn.write(b"".join(parts))

    async def write(self, chunk: bytes) -> None:
        """One chunk of a streamed response, written now; waits while the client reads slower than we write."""
        if chunk:
            self._conn.write(b"%x\r\n%b\r\n" % (len(chunk), chunk))
            await self._conn.drain()

    def end(self) -> None:
        """The terminating chunk: the client has the whole response."""
        if not self.done:
            self.done = True
            self._conn.write(b"0\r\n\r\n")
            self._conn.response_done(self._keep_alive)

    def abort(self) -> None:
        """Close the connection without ending the response: the client sees an incomplete answer."""
        if not self.done:
            self.done = True
            self._conn.close()


Handler = Callable[[Request, Reply], Awaitable[None]]


class ServerConnection(asyncio.Protocol):
    """One client connection: parse requests, run the handler for each in turn, keep alive or close."""

    def __init__(self, handler: Handler, connections: set[ServerConnection]) -> None:
        self._handler = handler
        self._connections = connections
        self._parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._url = b""
        self._headers: dict[str, str] = {}
        self._body: list[bytes] = []
        self._size = 0
        self._queue: deque[Request] = deque()
        self._task: asyncio.Task[None] | None = None
        self._can_write: asyncio.Event | None = None
        self._idle: asyncio.TimerHandle | None = None
        self._loop = asyncio.get_event_loop()

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        self._connections.add(self)
        self._arm_idle()

    def data_received(self, data: bytes) -> None:
        self._disarm_idle()
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._reject(400, "protocol upgrades are not supported")
        except httptools.HttpParserError as exc:
            self._reject(400, f"not an HTTP/1.1 request: {exc}")
        except _TooLarge:
            self._reject(413, f"the request body is over {MAX_BODY_BYTES} bytes")

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._connections.discard(self)
        self._disarm_idle()
        if self._task is not None and not self._task.done():
            self._task.cancel()  # the client went away: stop its work (and the upstream request)
        if self._can_write is not None:
            self._can_write.set()

    def pause_writing(self) -> None:
        if self._can_write is None:
            self._can_write = asyncio.Event()
        self._can_write.clear()

    def resume_writing(self) -> None:
        if self._can_write is not None:
            self._can_write.set()

    # httptools callbacks

    def on_message_begin(self) -> None:
        self._url = b""
        self._headers = {}
        self._body = []
        self._size = 0

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        self._headers[key] = f"{self._headers[key]}, {text}" if key in self._headers else text

    def on_headers_complete(self) -> None:
        if self._headers.get("expect", "").lower() == "100-continue" and self.transport is not None:
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def on_body(self, body: bytes) -> None:
        self._size += len(body)
        if self._size > MAX_BODY_BYTES:
            raise _TooLarge
        self._body.append(body)

    def on_message_complete(self) -> None:
        method = self._parser.get_method().decode("latin-1")
        request = Request(method, self._url, self._headers, b"".join(self._body), self._parser.should_keep_alive())
        self._queue.append(request)
        if self._task is None:
            self._next()

    # use

    def write(self, data: bytes) -> None:
        if not self.closed and self.transport is not None:
            self.transport.write(data)

    async def drain(self) -> None:
        if self._can_write is not None and not self._can_write.is_set() and not self.closed:
            await self._can_write.wait()

    def response_done(self, keep_alive: bool) -> None:
        if not keep_alive:
            self.close()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            if self.transport is not None:
                self.transport.close()

    def _next(self) -> None:
        if not self._queue or self.closed:
            self._task = None
            if not self.closed:
                self._arm_idle()
            return
        request = self._queue.popleft()
        self._task = self._loop.create_task(self._run(request))

    async def _run(self, request: Request) -> None:
        reply = Reply(self, request.keep_alive)
        try:
            await self._handler(request, reply)
        except asyncio.CancelledError:
            self.close()
            raise
        except Exception:
            log.exception("gateway: unhandled error answering %s %s", request.method, request.path)
            if not reply.started:
                reply.send(500, [("content-type", "application/json")],
                           b'{"error": {"message": "internal gateway error", "type": "gateway_error"}}')
            else:
                reply.abort()
        if not reply.done:  # a handler that returned without answering
            reply.abort()
        self._next()

    def _reject(self, status: int, message: str) -> None:
        body = json.dumps({"error": {"message": message, "type": "invalid_request_error"}}).encode()
        self.write(status_line(status) + b"content-type: application/json\r\nconnection: close\r\n"
                   b"content-length: %d\r\n\r\n%b" % (len(body), body))
        self.close()

    def _arm_idle(self) -> None:
        self._disarm_idle()
        self._idle = self._loop.call_later(IDLE_TIMEOUT_S, self.close)

    def _disarm_idle(self) -> None:
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None


class _TooLarge(Exception):
    pass


class HttpServer:
    """`await HttpServer(handler).start(host, port)`; `await close()` stops listening and drops connections."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.connections: set[ServerConnection] = set()
        self._server: asyncio.base_events.Server | None = None

    async def start(self, host: str, port: int, *, backlog: int = 2048) -> int:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: ServerConnection(self.handler, self.connections), host, port,
                                          backlog=backlog, reuse_address=True)
        self._server = server
        sockets = list(server.sockets or [])
        return int(sockets[0].getsockname()[1]) if sockets else port

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            conn.close()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5.0)
