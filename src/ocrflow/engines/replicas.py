"""The servers of an OpenAI engine and the slots on them.

Pages wait for a slot on our side, earliest deadline first, so a retried page goes ahead of
pages that have not been tried yet. A slot goes to the healthy replica below its limit with
the fewest requests in flight whose circuit breaker is closed; when every breaker is open,
to a replica whose breaker lets a probe through (``breaker.py``).

Fewest in flight, not the lowest share of the limit: while the limits ramp up they differ by
chance (one server queued behind its first slow steps, the other did not), and a batch that
fits in both servers at once is handed out in the first seconds, before any answer. Split
by limit, it followed that noise: on two H100s, 385 against 263 requests running and the
second GPU 15 points less busy. A limit only caps its replica; a slower replica gets less
work because its slots free up later and it reaches its limit sooner.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ocrflow.engines.breaker import BreakerPolicy, CircuitBreaker
from ocrflow.engines.limiter import ReplicaLimiter


@dataclass
class Replica:
    """One server; ``url`` is its OpenAI base URL (…/v1)."""

    url: str
    limiter: ReplicaLimiter
    in_flight: int = 0
    healthy: bool = True
    failures: int = 0
    checking: bool = False
    has_metrics: bool | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    completed: int = 0
    #: The context length the server reports for the model (``/v1/models``), if any.
    max_model_len: int | None = None
    breaker_policy: BreakerPolicy = field(default_factory=BreakerPolicy)
    breaker: CircuitBreaker = field(init=False)

    def __post_init__(self) -> None:
        self.breaker = CircuitBreaker(self.url, self.breaker_policy)

    @property
    def root(self) -> str:
        """The server's root URL (without ``/v1``), where ``/health`` and ``/metrics`` are."""
        return self.url.rstrip("/").removesuffix("/v1")

    @property
    def load(self) -> float:
        """Requests in flight as a share of the replica's limit."""
        return self.in_flight / max(self.limiter.limit, 1)

    @property
    def free(self) -> bool:
        """Healthy, and below its in-flight limit."""
        return self.healthy and self.in_flight < int(self.limiter.limit)


@dataclass(order=True)
class _Waiter:
    """A request waiting for a slot; ordered by deadline, then by arrival."""

    deadline: float
    seq: int
    future: asyncio.Future[Replica] = field(compare=False)


class ReplicaSlots:
    """Hands out slots on ``replicas``; waiters are served earliest deadline first."""

    def __init__(self, replicas: list[Replica]) -> None:
        self.replicas = replicas
        self._waiters: list[_Waiter] = []
        self._seq = itertools.count()

    @property
    def waiting(self) -> int:
        """Requests waiting for a slot (cancelled ones included until they are passed)."""
        return len(self._waiters)

    def pick(self) -> Replica | None:
        """The free replica with the fewest requests in flight (then the lowest share of
        its limit) whose breaker is closed; else a free one whose open breaker lets a probe
        through now."""
        free = [r for r in self.replicas if r.free]
        closed = [r for r in free if not r.breaker.is_open]
        if closed:
            return min(closed, key=lambda r: (r.in_flight, r.load))
        now = time.monotonic()
        return next((r for r in free if r.breaker.allows(now)), None)

    async def acquire(self, deadline: float) -> Replica:
        """A slot on a replica, at once or when one is handed to this request."""
        if not self._waiters:
            replica = self.pick()
            if replica is not None:
                replica.in_flight += 1
                return replica
        waiter = _Waiter(deadline, next(self._seq), asyncio.get_running_loop().create_future())
        heapq.heappush(self._waiters, waiter)
        self.dispatch()  # cancelled waiters ahead of us may be all that is queued
        try:
            return await waiter.future
        except asyncio.CancelledError:
            # Handed a slot in the same instant we were cancelled: give it back.
            if waiter.future.done() and not waiter.future.cancelled():
                self.release(waiter.future.result())
            raise

    def dispatch(self) -> None:
        """Hand free slots to waiters, earliest deadline first."""
        while self._waiters:
            if self._waiters[0].future.done():  # cancelled while waiting
                heapq.heappop(self._waiters)
                continue
            replica = self.pick()
            if replica is None:
                return
            waiter = heapq.heappop(self._waiters)
            replica.in_flight += 1
            waiter.future.set_result(replica)

    def release(self, replica: Replica) -> None:
        """Give a slot back; a waiter may take it at once."""
        replica.in_flight -= 1
        self.dispatch()

    def fail_all(self, error: Callable[[], BaseException]) -> None:
        """Wake every waiter with an ``error()`` of its own."""
        while self._waiters:
            waiter = heapq.heappop(self._waiters)
            if not waiter.future.done():
                waiter.future.set_exception(error())
