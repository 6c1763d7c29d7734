"""The one seam that touches the network: POST a JSON body, GET a URL, get status/headers/body back.

`KeepAliveTransport` (the fleet's) sends `http://` requests (every replica) over keep-alive
HTTP/1.1 connections of its own, per replica (http1.py: asyncio.Protocol + httptools), and
anything else (an `https://` provider) through `AiohttpTransport`. Measured on 2 cores at
concurrency 256 against 4 sim replicas (bench/bench_eval.py section 4, bench/bench_ops_bench.py):
one shared httpx AsyncClient spends its CPU in httpcore's pool scheduling (43-97 req/s); aiohttp
with a connector per replica ~0.15 ms of client CPU per call, most of it aiohttp's own objects;
http1.py ~0.05 ms, which is what keeps `ops bench` near its bound when the machine is busy.
`AiohttpTransport` keeps one `aiohttp.ClientSession` per replica, each with its own connector
capped at the replica's `cap`; `trust_env=False`: no proxy or other environment variable can send
a request anywhere but the URL the routing resolved (http1.py reads no environment at all).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Mapping
from typing import NamedTuple, Protocol
from urllib.parse import urlsplit

import aiohttp

from orchestra_ops.client import http1
from orchestra_ops.client.call_errors import TransportError
from orchestra_ops.client.replica import Replica


class Response(NamedTuple):
    status: int
    headers: Mapping[str, str]
    body: bytes


class Transport(Protocol):
    async def post(self, replica: Replica, url: str, body: bytes, headers: Mapping[str, str],
                   timeout: float) -> Response: ...

    async def get(self, replica: Replica, url: str, timeout: float) -> Response: ...

    async def close(self) -> None: ...


class AiohttpTransport:
    """aiohttp with one session (and one capped connector) per replica."""

    def __init__(self) -> None:
        self._sessions: dict[int, aiohttp.ClientSession] = {}

    def _session(self, replica: Replica) -> aiohttp.ClientSession:
        session = self._sessions.get(id(replica))
        if session is None or session.closed:
            connector = aiohttp.TCPConnector(limit=replica.cap, limit_per_host=replica.cap,
                                             ttl_dns_cache=300, keepalive_timeout=30)
            session = aiohttp.ClientSession(connector=connector, trust_env=False, raise_for_status=False,
                                            auto_decompress=True)
            self._sessions[id(replica)] = session
        return session

    async def post(self, replica: Replica, url: str, body: bytes, headers: Mapping[str, str],
                   timeout: float) -> Response:
        return await self._request(replica, "POST", url, body, headers, timeout)

    async def get(self, replica: Replica, url: str, timeout: float) -> Response:
        return await self._request(replica, "GET", url, None, {}, timeout)

    async def _request(self, replica: Replica, method: str, url: str, body: bytes | None,
                       headers: Mapping[str, str], timeout: float) -> Response:
        session = self._session(replica)
        try:
            async with session.request(method, url, data=body, headers=dict(headers),
                                       timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
                payload = await resp.read()
                return Response(resp.status, resp.headers, payload)
        except asyncio.TimeoutError:
            raise TransportError("timeout", f"no answer from {replica.address} within {timeout:g} s") from None
        except (aiohttp.ClientError, OSError) as exc:
            detail = str(exc) or type(exc).__name__
            raise TransportError("connection", f"{replica.address}: {detail}") from None

    async def close(self) -> None:
        sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            await session.close()


class KeepAliveTransport:
    """`http://` URLs over http1.py's keep-alive connections (one Endpoint per replica); others via aiohttp."""

    def __init__(self) -> None:
        self._endpoints: dict[int, http1.Endpoint] = {}
        self._fallback: AiohttpTransport | None = None

    def _endpoint(self, replica: Replica, url: str) -> http1.Endpoint | None:
        endpoint = self._endpoints.get(id(replica))
        if endpoint is None:
            if not url.startswith("http://"):
                return None
            parts = urlsplit(url)
            if parts.hostname is None:
                return None
            endpoint = http1.Endpoint(parts.hostname, parts.port or 80)
            self._endpoints[id(replica)] = endpoint
        return endpoint

    def _aiohttp(self) -> AiohttpTransport:
        if self._fallback is None:
            self._fallback = AiohttpTransport()
        return self._fallback

    async def post(self, replica: Replica, url: str, body: bytes, headers: Mapping[str, str],
                   timeout: float) -> Response:
        endpoint = self._endpoint(replica, url)
        if endpoint is None:
            return await self._aiohttp().post(replica, url, body, headers, timeout)
        return await self._request(replica, endpoint, "POST", url, headers, body, timeout)

    async def get(self, replica: Replica, url: str, timeout: float) -> Response:
        endpoint = self._endpoint(replica, url)
        if endpoint is None:
            return await self._aiohttp().get(replica, url, timeout)
        return await self._request(replica, endpoint, "GET", url, {}, None, timeout)

    async def _request(self, replica: Replica, endpoint: http1.Endpoint, method: str, url: str,
                       headers: Mapping[str, str], body: bytes | None, timeout: float) -> Response:
        try:
            if sys.version_info >= (3, 11):
                async with asyncio.timeout(timeout):
                    reply = await http1.request(endpoint, method, url, headers, body)
            else:  # no asyncio.timeout: wait_for (one task more per call)
                reply = await asyncio.wait_for(http1.request(endpoint, method, url, headers, body), timeout)
        except asyncio.TimeoutError:
            raise TransportError("timeout", f"no answer from {replica.address} within {timeout:g} s") from None
        except OSError as exc:
            detail = str(exc) or type(exc).__name__
            raise TransportError("connection", f"{replica.address}: {detail}") from None
        return Response(reply.status, reply.headers, reply.body)

    async def close(self) -> None:
        endpoints, self._endpoints = list(self._endpoints.values()), {}
        for endpoint in endpoints:
            endpoint.close()
        if self._fallback is not None:
            await self._fallback.close()
