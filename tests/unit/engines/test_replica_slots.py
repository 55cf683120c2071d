"""How ``ReplicaSlots`` hands a batch out over replicas whose limits differ."""

from __future__ import annotations

import asyncio

from ocrflow.engines.limiter import ReplicaLimiter
from ocrflow.engines.replicas import Replica, ReplicaSlots


def _replicas(*limits: int) -> list[Replica]:
    return [Replica(f"http://r{i}/v1", ReplicaLimiter(limit)) for i, limit in enumerate(limits)]


def _hand_out(slots: ReplicaSlots, count: int) -> list[int]:
    async def main() -> list[int]:
        taken = [await slots.acquire(deadline=float(i)) for i in range(count)]
        return [sum(r is replica for r in taken) for replica in slots.replicas]

    return asyncio.run(main())


def test_a_batch_that_fits_is_split_evenly_whatever_the_limits() -> None:
    """Limits that differ by chance while they ramp (700 and 450) must not skew the split
    of a batch both servers can hold: on two H100s that skew left one GPU 15 points idle."""
    replicas = _replicas(700, 450)
    assert _hand_out(ReplicaSlots(replicas), 900) == [450, 450]


def test_a_limit_caps_its_replica_and_the_rest_goes_elsewhere() -> None:
    replicas = _replicas(700, 300)
    assert _hand_out(ReplicaSlots(replicas), 900) == [600, 300]
    assert [r.in_flight for r in replicas] == [600, 300]


def test_a_freed_slot_goes_to_the_replica_with_fewest_in_flight() -> None:
    replicas = _replicas(10, 10)
    slots = ReplicaSlots(replicas)
    assert _hand_out(slots, 12) == [6, 6]
    for _ in range(4):
        slots.release(replicas[1])  # the second replica answered four pages
    assert _hand_out(slots, 4) == [0, 4]


def test_an_open_breaker_sends_work_to_the_other_replica() -> None:
    replicas = _replicas(10, 10)
    for second in range(12):  # failing for longer than the breaker's window
        replicas[0].breaker.failed("connection refused", float(second))
    assert replicas[0].breaker.is_open
    assert _hand_out(ReplicaSlots(replicas), 5) == [0, 5]
