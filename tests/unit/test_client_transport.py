"""KeepAliveTransport (client/http1.py): keep-alive reuse, response framings, stale connections,
timeouts and refused connections, against real servers on 127.0.0.1 (aiohttp.web, or a raw
asyncio server where the test needs bytes no framework would send)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any

import pytest
from aiohttp import web

from orchestra_ops.client.call_errors import TransportError
from orchestra_ops.client.replica import Replica
from orchestra_ops.client.retry import parse_retry_after
from orchestra_ops.client.transport import KeepAliveTransport
from tests.helpers import free_port
from tests.webapp import serve_app

JSON = {"Content-Type": "application/json"}


@contextlib.asynccontextmanager
async def web_server(routes: list[web.RouteDef]) -> AsyncIterator[tuple[int, list[tuple[str, int]]]]:
    """An aiohttp server; yields (port, [(path, client port) per request])."""
    seen: list[tuple[str, int]] = []

    @web.middleware
    async def record(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                     ) -> web.StreamResponse:
        peer = request.transport.get_extra_info("peername") if request.transport else None
        seen.append((request.path, peer[1] if peer else -1))
        return await handler(request)

    app = web.Application(middlewares=[record])
    app.add_routes(routes)
    async with serve_app(app) as port:
        yield port, seen


RawScript = Callable[[int, int, bytes], bytes | None]  # (connection no., request no. on it, request) -> bytes


@contextlib.asynccontextmanager
async def raw_server(script: RawScript) -> AsyncIterator[tuple[int, list[tuple[int, int]]]]:
    """A server that answers each request with `script(conn, n, request)`; None closes the connection
    without answering, as does an answer with `Connection: close` after it is written.
    Yields (port, [(connection no., request no.) per request received])."""
    seen: list[tuple[int, int]] = []
    connections = 0

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        conn = connections
        try:
            for n in range(1, 100):
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.decode("latin-1").split("\r\n"):
                    if line.lower().startswith("content-length:"):
                        length = int(line.split(":", 1)[1])
                request = head + await reader.readexactly(length)
                seen.append((conn, n))
                answer = script(conn, n, request)
                if answer is None:
                    break
                writer.write(answer)
                await writer.drain()
                if b"Connection: close" in answer:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield port, seen
    finally:
        server.close()
        await server.wait_closed()


def ok(text: bytes = b"ok", extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n%s" % (len(text), extra, text)


async def empty(request: web.Request) -> web.Response:
    return web.Response()


async def fast_answer(request: web.Request) -> web.Response:
    return web.Response(text="f")


def replica(port: int) -> Replica:
    return Replica.for_server("127.0.0.1", port, 8)


def run(main: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    return asyncio.run(main())


def test_requests_reuse_one_connection_and_carry_body_and_headers() -> None:
    async def echo(request: web.Request) -> web.Response:
        body = await request.json()
        return web.json_response({"got": body, "type": request.headers.get("Content-Type")},
                                 headers={"Retry-After": "7"})

    async def main() -> None:
        async with web_server([web.post("/v1/chat/completions", echo),
                               web.get("/health", empty)]) as (port, seen):
            transport, rep = KeepAliveTransport(), replica(port)
            answers = [await transport.post(rep, rep.chat_url, json.dumps({"i": i}).encode(), JSON, 5.0)
                       for i in range(3)]
            health = await transport.get(rep, f"http://127.0.0.1:{port}/health", 5.0)
            await transport.close()
        assert [a.status for a in answers] == [200, 200, 200] and health.status == 200 and health.body == b""
        assert [json.loads(a.body) for a in answers] == [{"got": {"i": i}, "type": "application/json"}
                                                         for i in range(3)]
        assert parse_retry_after(answers[0].headers) == 7.0
        assert [path for path, _ in seen] == ["/v1/chat/completions"] * 3 + ["/health"]
        assert len({client_port for _, client_port in seen}) == 1  # one keep-alive connection
    run(main)


def test_chunked_interim_and_close_delimited_bodies_and_connection_close() -> None:
    def script(conn: int, n: int, request: bytes) -> bytes:
        if b"/chunked" in request:
            return (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-A: 1\r\nX-A: 2\r\n\r\n"
                    b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")
        if b"/interim" in request:
            return b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n" + ok(b"after the hint")
        if b"/eof" in request:
            return b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end"
        return ok(b"closing", b"Connection: close\r\n")

    async def main() -> None:
        async with raw_server(script) as (port, seen):
            transport, rep = KeepAliveTransport(), replica(port)
            base = f"http://127.0.0.1:{port}"
            chunked = await transport.get(rep, f"{base}/chunked", 5.0)
            again = await transport.get(rep, f"{base}/chunked", 5.0)
            interim = await transport.get(rep, f"{base}/interim", 5.0)
            eof = await transport.get(rep, f"{base}/eof", 5.0)
            closing = await transport.post(rep, f"{base}/close", b"{}", JSON, 5.0)
            after = await transport.post(rep, f"{base}/close", b"{}", JSON, 5.0)
            await transport.close()
        assert chunked.body == again.body == b"hello world" and chunked.headers["X-A"] == "1, 2"
        assert (interim.status, interim.body, "Link" in interim.headers) == (200, b"after the hint", False)
        assert eof.body == b"until the end"
        assert closing.body == after.body == b"closing"
        # chunked keeps the connection; the close-delimited body and Connection: close end theirs
        assert seen == [(1, 1), (1, 2), (1, 3), (1, 4), (2, 1), (3, 1)]
    run(main)


def test_a_reused_connection_the_server_closed_is_retried_once_on_a_new_one() -> None:
    def script(conn: int, n: int, request: bytes) -> bytes | None:
        return ok(b"c%d" % conn) if n == 1 else None  # keep-alive ran out: close unanswered

    async def main() -> None:
        async with raw_server(script) as (port, seen):
            transport, rep = KeepAliveTransport(), replica(port)
            first = await transport.post(rep, rep.chat_url, b"{}", JSON, 5.0)
            second = await transport.post(rep, rep.chat_url, b"{}", JSON, 5.0)
            await transport.close()
        assert (first.body, second.body) == (b"c1", b"c2")
        assert seen == [(1, 1), (1, 2), (2, 1)]
    run(main)


def test_a_new_connection_closed_unanswered_is_a_connection_error_not_retried() -> None:
    async def main() -> None:
        async with raw_server(lambda conn, n, request: None) as (port, seen):
            transport, rep = KeepAliveTransport(), replica(port)
            with pytest.raises(TransportError) as info:
                await transport.post(rep, rep.chat_url, b"{}", JSON, 5.0)
            await transport.close()
        assert info.value.kind == "connection"
        assert info.value.message.startswith(f"127.0.0.1:{port}: the server closed the connection before answering")
        assert seen == [(1, 1)]
    run(main)


def test_timeout_closes_the_connection_and_the_next_request_opens_a_new_one() -> None:
    cancelled: list[str] = []

    async def slow(request: web.Request) -> web.Response:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(request.path)
            raise
        return web.Response()

    async def main() -> None:
        async with web_server([web.post("/slow", slow), web.post("/fast", fast_answer)]
                              ) as (port, seen):
            transport, rep = KeepAliveTransport(), replica(port)
            base = f"http://127.0.0.1:{port}"
            with pytest.raises(TransportError) as info:
                await transport.post(rep, f"{base}/slow", b"{}", JSON, 0.3)
            fast = await transport.post(rep, f"{base}/fast", b"{}", JSON, 5.0)
            for _ in range(100):
                if cancelled:
                    break
                await asyncio.sleep(0.02)
            await transport.close()
        assert info.value.kind == "timeout"
        assert info.value.message == f"no answer from 127.0.0.1:{port} within 0.3 s"
        assert fast.body == b"f" and cancelled == ["/slow"]  # the server saw the client go
        assert seen[0][1] != seen[1][1]  # the timed-out connection was not reused
    run(main)


def test_refused_connection_names_the_replica() -> None:
    async def main() -> None:
        port = free_port()
        transport, rep = KeepAliveTransport(), replica(port)
        with pytest.raises(TransportError) as info:
            await transport.post(rep, rep.chat_url, b"{}", JSON, 5.0)
        await transport.close()
        assert info.value.kind == "connection" and info.value.message.startswith(f"127.0.0.1:{port}: ")
    run(main)


def test_https_goes_through_aiohttp_and_header_line_breaks_are_refused() -> None:
    first_bytes: list[bytes] = []

    async def record_and_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        first_bytes.append(await reader.read(1))
        writer.close()

    async def main() -> None:
        server = await asyncio.start_server(record_and_close, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        transport = KeepAliveTransport()
        provider = Replica.for_provider(f"https://127.0.0.1:{port}/v1", 8)
        with pytest.raises(TransportError) as info:
            await transport.post(provider, provider.chat_url, b"{}", JSON, 5.0)
        rep = replica(port)
        with pytest.raises(ValueError, match="line break"):
            await transport.post(rep, rep.chat_url, b"{}", {"Authorization": "Bearer x\r\nX-Evil: 1"}, 5.0)
        await transport.close()
        server.close()
        await server.wait_closed()
        assert info.value.kind == "connection"
        assert first_bytes == [b"\x16"]  # a TLS handshake record (aiohttp), not a plain request line
    run(main)
