"""The one seam that touches the network: POST a JSON body, GET a URL, get status/headers/body back.

`AiohttpTransport` keeps one `aiohttp.ClientSession` per replica, each with its own connector
capped at the replica's `cap`. Measured on 2 cores at concurrency 256 against 4 replicas (see
bench/bench_eval.py): one shared httpx AsyncClient spends its CPU in httpcore's pool scheduling,
aiohttp with a connector per replica does not. `trust_env=False`: no proxy or other environment
variable can send a request anywhere but the URL the routing resolved.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import NamedTuple, Protocol

import aiohttp

from orchestra_ops.client.errors import TransportError
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
