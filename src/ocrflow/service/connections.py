"""Connection guards for ``ocrflow serve``: slow clients are cut off, connections capped.

uvicorn times out idle keep-alive connections, but not a request that arrives slowly: a
client sending its headers or body one byte at a time holds a connection (and, for an
upload, a worker of the API) for as long as it likes. ``guarded_protocol`` subclasses
uvicorn's h11 protocol with three limits:

- the request head must arrive within ``header_timeout_s`` of the connection opening (or
  of the first byte of a following request on a kept-alive connection);
- while a request body is being received, the client must send something every
  ``body_idle_timeout_s`` and, after ``body_grace_s``, keep an average of at least
  ``body_min_bytes_per_s`` (time the server itself stopped reading does not count);
- at most ``max_connections`` open connections, ``max_connections_per_client`` from one
  address: the next one gets a 429 and is closed.

A client cut off gets a 408 when no response has started, and the connection is closed;
the service logs one line per cut, never a traceback.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger("ocrflow.service")


@dataclass(frozen=True)
class ConnectionLimits:
    """How long a request may take to arrive, and how many connections may be open."""

    header_timeout_s: float = 10.0
    body_idle_timeout_s: float = 30.0
    body_grace_s: float = 20.0
    body_min_bytes_per_s: float = 1024.0
    max_connections: int = 1000
    max_connections_per_client: int = 200
    #: How often each connection checks its clock.
    tick_s: float = 1.0


def guarded_protocol(limits: ConnectionLimits) -> type[H11Protocol]:
    """uvicorn's h11 protocol with ``limits`` applied (pass as ``uvicorn.run(http=...)``)."""

    class GuardedH11Protocol(_GuardedProtocol):
        pass

    GuardedH11Protocol.limits = limits
    return GuardedH11Protocol


class _GuardedProtocol(H11Protocol):
    limits: ConnectionLimits = ConnectionLimits()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._tick: asyncio.TimerHandle | None = None
        self._waiting_since: float | None = None  # a request head is being waited for
        self._head_cycle: object = None  # the cycle that was current when that began
        self._body_bytes = 0
        self._body_active_s = 0.0
        self._last_data = 0.0
        self._body_cycle: object = None

    # -- connection life ------------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        refusal = self._over_limit()
        if refusal:
            log.warning("refused a connection from %s: %s", _address(self.client), refusal)
            _write_and_close(transport, 429, refusal, retry_after=5)
            return
        self._waiting_since, self._head_cycle = time.monotonic(), self.cycle
        self._last_data = time.monotonic()
        self._tick = self.loop.call_later(self.limits.tick_s, self._check)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._tick is not None:
            self._tick.cancel()
            self._tick = None
        super().connection_lost(exc)

    def _over_limit(self) -> str | None:
        if len(self.connections) > self.limits.max_connections:
            return "too many connections to this service"
        host = self.client[0] if self.client else None
        # Not every protocol class uvicorn declares has ``client``: asked of each one.
        clients = (getattr(c, "client", None) for c in self.connections)
        same = Counter(client[0] for client in clients if client)
        if host is not None and same[host] > self.limits.max_connections_per_client:
            return "too many connections from this address"
        return None

    # -- data -----------------------------------------------------------------------------
    def data_received(self, data: bytes) -> None:
        now = time.monotonic()
        self._last_data = now
        if self._between_requests() and self._waiting_since is None:
            self._waiting_since, self._head_cycle = now, self.cycle
        elif self._receiving_body():
            self._body_bytes += len(data)
        super().data_received(data)

    def _between_requests(self) -> bool:
        return self.cycle is None or self.cycle.response_complete

    def _receiving_body(self) -> bool:
        cycle = self.cycle
        return cycle is not None and not cycle.response_complete and cycle.more_body

    # -- the clock ------------------------------------------------------------------------
    def _check(self) -> None:
        self._tick = None
        if self.transport.is_closing():
            return
        now = time.monotonic()
        reason = self._head_overdue(now) or self._body_too_slow(now)
        if reason:
            log.warning("closed a slow connection from %s: %s", _address(self.client), reason)
            self._cut(reason)
            return
        self._tick = self.loop.call_later(self.limits.tick_s, self._check)

    def _head_overdue(self, now: float) -> str | None:
        if self._waiting_since is None:
            return None
        if self.cycle is not self._head_cycle:  # a new request head has arrived
            self._waiting_since = None
            return None
        if now - self._waiting_since > self.limits.header_timeout_s:
            return f"request head not received within {self.limits.header_timeout_s:g} s"
        return None

    def _body_too_slow(self, now: float) -> str | None:
        if not self._receiving_body():
            return None
        if self.cycle is not self._body_cycle:
            self._body_cycle, self._body_bytes, self._body_active_s = self.cycle, 0, 0.0
            self._last_data = now
            return None
        if self.flow.read_paused:  # the server stopped reading: not the client's fault
            self._last_data = now
            return None
        self._body_active_s += self.limits.tick_s
        if now - self._last_data > self.limits.body_idle_timeout_s:
            return f"no request body data for {self.limits.body_idle_timeout_s:g} s"
        rate = self._body_bytes / max(self._body_active_s, 1e-9)
        if self._body_active_s > self.limits.body_grace_s and (
            rate < self.limits.body_min_bytes_per_s
        ):
            return f"request body slower than {self.limits.body_min_bytes_per_s:g} bytes/s"
        return None

    def _cut(self, reason: str) -> None:
        cycle = self.cycle
        started = cycle is not None and cycle.response_started
        if cycle is not None and not cycle.response_complete:
            cycle.disconnected = True  # the app sees http.disconnect on its next receive
            cycle.message_event.set()
        if not started and self.conn.our_state in {h11.IDLE, h11.SEND_RESPONSE}:
            _write_and_close(self.transport, 408, reason)
        else:
            self.transport.close()


def _address(client: tuple[str, int] | None) -> str:
    return f"{client[0]}:{client[1]}" if client else "an unknown address"


def _write_and_close(
    transport: asyncio.Transport, status: int, reason: str, retry_after: int | None = None
) -> None:
    """A minimal JSON error response written straight to the socket, then close."""
    phrase = {408: "Request Timeout", 429: "Too Many Requests"}[status]
    body = json.dumps({"detail": reason}).encode()
    head = [
        f"HTTP/1.1 {status} {phrase}",
        "content-type: application/json",
        f"content-length: {len(body)}",
        "connection: close",
    ]
    if retry_after is not None:
        head.append(f"retry-after: {retry_after}")
    transport.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
    transport.close()
