"""`https://` providers for the gateway: aiohttp, answers read as they arrive (upstream.py's interface).

`trust_env=False`: no proxy variable sends a request anywhere but the provider's declared URL.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping

import aiohttp

from orchestra_ops.client.call_errors import TransportError


class StreamCut(Exception):
    """The answer ended before it was complete (the connection closed, or the data was not HTTP)."""


class _AiohttpAnswer:
    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response
        self.status = response.status
        self.headers = list(response.headers.items())

    async def read(self) -> bytes:
        try:
            return await self._response.read()
        except (aiohttp.ClientError, OSError) as exc:
            raise StreamCut(str(exc) or type(exc).__name__) from None

    async def chunks(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._response.content.iter_any():
                yield chunk
        except (aiohttp.ClientError, OSError) as exc:
            raise StreamCut(str(exc) or type(exc).__name__) from None

    def release(self) -> None:
        self._response.release()

    def close(self) -> None:
        self._response.close()


class HttpsUpstream:
    """One aiohttp session for every provider; the caller bounds the time (asyncio.timeout)."""

    def __init__(self) -> None:
        self._session: aiohttp.ClientSession | None = None

    async def open(self, url: str, method: str, headers: Mapping[str, str], body: bytes | None,
                            address: str) -> _AiohttpAnswer:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(trust_env=False, auto_decompress=True,
                                                  timeout=aiohttp.ClientTimeout(total=None))
        try:
            response = await self._session.request(method, url, data=body, headers=dict(headers))
        except (aiohttp.ClientError, OSError) as exc:
            raise TransportError("connection", f"{address}: {str(exc) or type(exc).__name__}") from None
        return _AiohttpAnswer(response)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
