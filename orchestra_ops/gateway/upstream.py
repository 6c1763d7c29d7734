"""Requests to a replica whose answer is read as it arrives: the head first, then the body whole or chunk by chunk.

`http://` replicas go over keep-alive HTTP/1.1 connections of our own (asyncio.Protocol +
httptools, as client/http1.py does for the engine, which reads whole answers only); `https://`
providers go through aiohttp (upstream_https.py, `trust_env=False`).

    answer = await upstreams.open(url, method, headers, body)  # TransportError: no head arrived
    answer.status, answer.headers
    body = await answer.read()                                 # or: async for chunk in answer.chunks()
    answer.release()                                           # the connection back to the idle list

A cut connection after the head raises `StreamCut` from `read`/`chunks`; the connection is closed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping
from typing import Protocol, cast
from urllib.parse import urlsplit

import httptools

from orchestra_ops.client.call_errors import TransportError
from orchestra_ops.client.http1 import encode_request
from orchestra_ops.gateway.upstream_https import HttpsUpstream, StreamCut

__all__ = ["Answer", "StreamCut", "Upstreams"]

IDLE_TIMEOUT_S = 4.0  # below uvicorn's (so vLLM's) keep-alive of 5 s: never reuse what the server is closing


class Answer(Protocol):
    status: int
    headers: list[tuple[str, str]]

    async def read(self) -> bytes: ...

    def chunks(self) -> AsyncIterator[bytes]: ...

    def release(self) -> None: ...

    def close(self) -> None: ...


class _Connection(asyncio.Protocol):
    """One keep-alive connection carrying one request at a time, its answer delivered as it arrives."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.answered = False  # bytes of the current answer arrived
        self.reusable = False
        self.idle_since = 0.0
        self._parser = httptools.HttpResponseParser(self)
        self.status = 0
        self.headers: list[tuple[str, str]] = []
        self._pending: list[bytes] = []
        self._complete = False
        self._error: Exception | None = None
        self._head: asyncio.Future[None] | None = None
        self._wakeup: asyncio.Future[None] | None = None
        self._chunked_or_sized = False

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if self._head is None:
            self.close()  # bytes nobody asked for: the connection cannot be trusted
            return
        self.answered = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(StreamCut(f"not an HTTP/1.1 response: {exc}"))
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.reusable = False
        if self._complete or self._head is None:
            return
        if self._head.done() and not self._chunked_or_sized:
            self._complete = True  # a body that ends with the connection
            self._wake()
            return
        detail = f": {exc}" if exc else ""
        self._fail(StreamCut(f"the server closed the connection before the answer was complete{detail}"))

    # httptools callbacks

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.decode("latin-1"), value.decode("latin-1")))

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if 100 <= status < 200:
            self.headers = []
            return
        self.status = status
        self._chunked_or_sized = any(k.lower() in ("content-length", "transfer-encoding") for k, _ in self.headers)
        if self._head is not None and not self._head.done():
            self._head.set_result(None)

    def on_body(self, body: bytes) -> None:
        self._pending.append(body)
        self._wake()

    def on_message_complete(self) -> None:
        if self.status == 0:  # the end of an interim (1xx) response
            return
        self.reusable = self._parser.should_keep_alive()
        self._complete = True
        self._wake()

    # use

    async def send(self, request: bytes) -> None:
        """Write a whole request; return once the answer's head (status and headers) arrived."""
        if self.closed or self.transport is None:
            raise ConnectionResetError("the connection is closed")
        self.status, self.headers, self._pending = 0, [], []
        self._complete = self.answered = self.reusable = False
        self._error = None
        self._head = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        await self._head

    async def next_piece(self) -> bytes | None:
        """Body bytes that arrived since the last call (waiting for some); None once the body is complete."""
        while True:
            if self._pending:
                data = b"".join(self._pending) if len(self._pending) > 1 else self._pending[0]
                self._pending = []
                return data
            if self._error is not None:
                raise self._error
            if self._complete:
                return None
            self._wakeup = asyncio.get_running_loop().create_future()
            try:
                await self._wakeup
            finally:
                self._wakeup = None

    def close(self) -> None:
        self.closed = True
        self.reusable = False
        if self.transport is not None:
            self.transport.close()

    def _wake(self) -> None:
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)

    def _fail(self, exc: Exception) -> None:
        self._error = exc
        if self._head is not None and not self._head.done():
            self._head.set_exception(ConnectionResetError(str(exc)))
        self._wake()


class _PlainAnswer:
    def __init__(self, pool: _HostPool, conn: _Connection) -> None:
        self._pool = pool
        self._conn = conn
        self.status = conn.status
        self.headers = conn.headers
        self._released = False

    async def read(self) -> bytes:
        parts = []
        while (piece := await self._conn.next_piece()) is not None:
            parts.append(piece)
        return b"".join(parts)

    async def chunks(self) -> AsyncIterator[bytes]:
        while (piece := await self._conn.next_piece()) is not None:
            yield piece

    def release(self) -> None:
        if not self._released:
            self._released = True
            self._pool.give_back(self._conn)

    def close(self) -> None:
        self._released = True
        self._conn.close()


class _HostPool:
    """The idle connections to one host:port."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self.idle: list[_Connection] = []

    def take_idle(self) -> _Connection | None:
        now = time.monotonic()
        while self.idle:
            conn = self.idle.pop()
            if not conn.closed and now - conn.idle_since < IDLE_TIMEOUT_S:
                return conn
            conn.close()
        return None

    def give_back(self, conn: _Connection) -> None:
        if conn.reusable and not conn.closed:
            conn.idle_since = time.monotonic()
            self.idle.append(conn)
        else:
            conn.close()

    def close(self) -> None:
        idle, self.idle = self.idle, []
        for conn in idle:
            conn.close()


class Upstreams:
    """Every replica's connections (http://) and one aiohttp session for https:// providers."""

    def __init__(self) -> None:
        self._pools: dict[tuple[str, int], _HostPool] = {}
        self._routes: dict[tuple[str, str], tuple[_HostPool, bytes]] = {}  # (method, url) -> its pool, request head
        self._https: HttpsUpstream | None = None

    async def open(self, url: str, method: str, headers: Mapping[str, str], body: bytes | None,
                   address: str) -> Answer:
        """Send a request; return once the head of its answer arrived. TransportError("connection") when
        no head arrived. The caller bounds the time (asyncio.timeout) and releases or closes the answer."""
        route = self._routes.get((method, url))
        if route is None:
            if not url.startswith("http://"):
                if self._https is None:
                    self._https = HttpsUpstream()
                return await self._https.open(url, method, headers, body, address)
            route = self._routes[(method, url)] = self._route(method, url)
        pool, head = route
        data = encode_request(head, headers, body)
        conn = pool.take_idle()
        reused = conn is not None
        try:
            if conn is None:
                conn = await self._connect(pool)
            try:
                await conn.send(data)
            except OSError:
                if not reused or conn.answered:
                    raise
                conn.close()  # its keep-alive ran out as we wrote: once more on a new connection
                conn = await self._connect(pool)
                await conn.send(data)
        except OSError as exc:
            if conn is not None:
                conn.close()
            raise TransportError("connection", f"{address}: {str(exc) or type(exc).__name__}") from None
        except BaseException:
            if conn is not None:
                conn.close()
            raise
        return _PlainAnswer(pool, conn)

    def _route(self, method: str, url: str) -> tuple[_HostPool, bytes]:
        """An http:// URL's host pool and request head, worked out once per (method, URL): the replicas'
        base URLs times the routes it forwards, so the table stays small."""
        parts = urlsplit(url)
        key = (parts.hostname or "", parts.port or 80)
        pool = self._pools.get(key)
        if pool is None:
            pool = self._pools[key] = _HostPool(*key)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        return pool, f"{method} {target} HTTP/1.1\r\nhost: {parts.netloc}\r\n".encode("latin-1")

    async def _connect(self, pool: _HostPool) -> _Connection:
        loop = asyncio.get_running_loop()
        _, conn = await loop.create_connection(_Connection, pool.host, pool.port)
        return conn

    async def close(self) -> None:
        pools, self._pools, self._routes = list(self._pools.values()), {}, {}
        for pool in pools:
            pool.close()
        if self._https is not None:
            await self._https.close()
