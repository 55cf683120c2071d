"""The HTTP connection pools of an OpenAI engine.

httpcore scans every connection and queued request of a pool on each event, so hundreds of
requests on one pool cost the event loop far more than the same requests spread over
several small pools (``engines/openai.py`` has the figures): a request takes the least busy
pool, and a new one is opened when all are full.
"""

from __future__ import annotations

import asyncio
import ssl

import httpx

#: Requests one httpx pool carries at once before another pool is opened.
SHARD_REQUESTS = 16


class HttpPools:
    """Several small httpx pools sharing one TLS context; each request goes to the least
    busy one."""

    def __init__(
        self, headers: dict[str, str], timeout: httpx.Timeout, tls: ssl.SSLContext
    ) -> None:
        self._headers = headers
        self._timeout = timeout
        self._tls = tls
        self._clients: list[httpx.AsyncClient] = []
        self._active: list[int] = []

    def acquire(self) -> int:
        """The index of a pool with room, opening one when all are busy."""
        if self._active:
            index = min(range(len(self._active)), key=self._active.__getitem__)
            if self._active[index] < SHARD_REQUESTS:
                self._active[index] += 1
                return index
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=SHARD_REQUESTS * 2)
        self._clients.append(
            httpx.AsyncClient(
                headers=self._headers, timeout=self._timeout, limits=limits, verify=self._tls
            )
        )
        self._active.append(1)
        return len(self._clients) - 1

    def release(self, index: int) -> None:
        self._active[index] -= 1

    def client(self, index: int) -> httpx.AsyncClient:
        return self._clients[index]

    async def aclose(self) -> None:
        await asyncio.gather(*(c.aclose() for c in self._clients), return_exceptions=True)
        self._clients.clear()
        self._active.clear()
