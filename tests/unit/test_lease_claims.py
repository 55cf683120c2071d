"""A claim run in a thread, its caller cancelled halfway: the lease it took goes back."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from ocrflow.storage.local import LocalStore
from ocrflow.workspace.leases import LEASES_DIR, Lease, LeaseManager, claim_in_thread


def _leases(root: Path) -> list[Path]:
    return list((root / LEASES_DIR).glob("*.json"))


def test_a_claim_cancelled_in_its_thread_gives_the_lease_back(tmp_path: Path) -> None:
    manager = LeaseManager(LocalStore(tmp_path), "remote-host:1:a", ttl_s=60)
    claiming = threading.Event()

    def slow_claim() -> Lease | None:
        claiming.set()
        time.sleep(0.3)  # the caller is cancelled while the claim is in its thread
        return manager.claim("item")

    async def cancel_while_claiming() -> None:
        task = asyncio.ensure_future(claim_in_thread(manager, slow_claim))
        await asyncio.to_thread(claiming.wait)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert not _leases(tmp_path)  # not claimed yet: the thread still sleeps
        await asyncio.sleep(0.6)  # the claim lands, then its release

    asyncio.run(cancel_while_claiming())
    assert not _leases(tmp_path), "the lease stayed held by nobody"
    # Free for anyone now, long before its 60 s expiry.
    assert LeaseManager(LocalStore(tmp_path), "remote-host:2:b").claim("item") is not None


def test_a_claim_not_cancelled_keeps_its_lease(tmp_path: Path) -> None:
    manager = LeaseManager(LocalStore(tmp_path), "remote-host:1:a", ttl_s=60)
    lease = asyncio.run(claim_in_thread(manager, lambda: manager.claim("item")))
    assert lease is not None and len(_leases(tmp_path)) == 1
    assert asyncio.run(claim_in_thread(manager, lambda: manager.claim("item"))) is None
