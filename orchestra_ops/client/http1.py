"""Plain-HTTP/1.1 keep-alive connections for the replicas: asyncio.Protocol + httptools (llhttp).

The per-request cost of a general client is most of what `ops` spends per call at hundreds in
flight (bench/bench_eval.py, bench/bench_ops_bench.py): aiohttp's request and response objects,
timers, URL and header objects cost ~0.10 ms of CPU per call. This module does only what the fleet
needs of `http://host:port` replicas: one request at a time per connection, the request written in
one piece, the response parsed by httptools (the llhttp binding uvicorn uses: Content-Length,
chunked, or a body that ends when the server closes), idle connections kept per replica and
reused. TLS, proxies, redirects, compression and cookies are not needed here and not done
(https:// providers go through aiohttp, see transport.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import NamedTuple, cast
from urllib.parse import urlsplit

import httptools

IDLE_TIMEOUT_S = 4.0  # below uvicorn's (so vLLM's) default keep-alive of 5 s: never reuse what it is closing


class Reply(NamedTuple):
    status: int
    headers: Mapping[str, str]
    body: bytes


class ConnectionClosed(ConnectionError):
    """The server closed the connection before the response was complete."""


class Connection(asyncio.Protocol):
    """One keep-alive connection; `exchange` sends a request and waits for its whole response."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.reusable = False  # the last response ended cleanly and the server keeps the connection
        self.answered = False  # response bytes arrived for the current request
        self.idle_since = 0.0
        self._parser = httptools.HttpResponseParser(self)
        self._waiter: asyncio.Future[Reply] | None = None
        self._status = 0
        self._headers: dict[str, str] = {}
        self._body: list[bytes] = []
        self._headers_done = False

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports are not subclasses

    def data_received(self, data: bytes) -> None:
        if self._waiter is None:  # bytes nobody asked for: the connection cannot be trusted
            self.close()
            return
        self.answered = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(ConnectionClosed(f"not an HTTP/1.1 response: {exc}"))
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.reusable = False
        if self._waiter is None or self._waiter.done():
            return
        chunked = "chunked" in self._header("transfer-encoding").lower()
        if self._headers_done and not chunked and not self._header("content-length"):
            self._finish()  # a body delimited by the end of the connection
            return
        detail = f": {exc}" if exc else ""
        self._fail(ConnectionClosed(f"the server closed the connection before answering{detail}"))

    # httptools callbacks

    def on_header(self, name: bytes, value: bytes) -> None:
        key = name.decode("latin-1")
        text = value.decode("latin-1")
        self._headers[key] = f"{self._headers[key]}, {text}" if key in self._headers else text

    def on_headers_complete(self) -> None:
        self._status = self._parser.get_status_code()
        self._headers_done = True

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        if 100 <= self._status < 200:  # an interim response (103 Early Hints …): the answer follows it
            self._status, self._headers, self._body, self._headers_done = 0, {}, [], False
            return
        self.reusable = self._parser.should_keep_alive()
        self._finish()

    # use

    async def exchange(self, request: bytes) -> Reply:
        """Write `request` (a whole HTTP/1.1 request) and return the response."""
        if self.closed or self.transport is None:
            raise ConnectionClosed("the connection is closed")
        self._status, self._headers, self._body = 0, {}, []
        self._headers_done = self.reusable = self.answered = False
        self._waiter = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        return await self._waiter

    def close(self) -> None:
        self.closed = True
        self.reusable = False
        if self.transport is not None:
            self.transport.close()

    def _header(self, name: str) -> str:
        for key, value in self._headers.items():
            if key.lower() == name:
                return value
        return ""

    def _finish(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(Reply(self._status, self._headers, b"".join(self._body)))

    def _fail(self, exc: Exception) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)


class Endpoint:
    """The idle connections to one `host:port`, and the request heads for its URLs (built once)."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self._idle: list[Connection] = []
        self._heads: dict[tuple[str, str], bytes] = {}

    def head(self, method: str, url: str) -> bytes:
        """`METHOD /path HTTP/1.1` and Host, for a URL of this endpoint."""
        key = (method, url)
        head = self._heads.get(key)
        if head is None:
            parts = urlsplit(url)
            target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            head = f"{method} {target} HTTP/1.1\r\nHost: {parts.netloc}\r\n".encode("latin-1")
            self._heads[key] = head
        return head

    def take_idle(self) -> Connection | None:
        """The most recently used idle connection that is still open and fresh, or None."""
        now = time.monotonic()
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed and now - conn.idle_since < IDLE_TIMEOUT_S:
                return conn
            conn.close()
        return None

    async def connect(self) -> Connection:
        _, conn = await asyncio.get_running_loop().create_connection(Connection, self.host, self.port)
        return conn

    def give_back(self, conn: Connection) -> None:
        if conn.reusable and not conn.closed:
            conn.idle_since = time.monotonic()
            self._idle.append(conn)
        else:
            conn.close()

    def close(self) -> None:
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


def encode_request(head: bytes, headers: Mapping[str, str], body: bytes | None) -> bytes:
    """One HTTP/1.1 request: the head, the caller's headers, Content-Length when there is a body."""
    lines = [head]
    for name, value in headers.items():
        if "\r" in value or "\n" in value or "\r" in name or "\n" in name:
            raise ValueError(f"header {name!r}: a line break is not allowed in an HTTP header")
        lines.append(f"{name}: {value}\r\n".encode("latin-1"))
    if body is not None:
        lines.append(b"Content-Length: %d\r\n\r\n" % len(body))
        lines.append(body)
    else:
        lines.append(b"\r\n")
    return b"".join(lines)


async def request(endpoint: Endpoint, method: str, url: str, headers: Mapping[str, str],
                  body: bytes | None) -> Reply:
    """One request over an idle connection (or a new one). A reused connection that the server
    closed before answering (its keep-alive ran out as we wrote) is retried once on a new one; a
    new connection is never retried here. Cancelled (a timeout, Ctrl-C): the connection is closed."""
    data = encode_request(endpoint.head(method, url), headers, body)
    conn = endpoint.take_idle()
    reused = conn is not None
    if conn is None:
        conn = await endpoint.connect()
    try:
        try:
            reply = await conn.exchange(data)
        except ConnectionClosed:
            if not reused or conn.answered:
                raise
            conn.close()
            conn = await endpoint.connect()
            reply = await conn.exchange(data)
    except BaseException:
        conn.close()
        raise
    endpoint.give_back(conn)
    return reply
