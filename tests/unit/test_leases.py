from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ocrflow.errors import OutputError
from ocrflow.storage.local import LocalStore
from ocrflow.workspace.leases import (
    HOST_ID_VARIABLE,
    LEASES_DIR,
    LeaseLost,
    LeaseManager,
    new_owner,
)


def test_claim_renew_release(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    alice = LeaseManager(store, "remote-host:1:a", ttl_s=30)
    bob = LeaseManager(store, "remote-host:2:b", ttl_s=30)
    lease = alice.claim("item")
    assert lease is not None
    assert bob.claim("item") is None  # held
    assert alice.renew(lease)
    assert [a["owner"] for a in bob.active()] == ["remote-host:1:a"]
    alice.release(lease)
    assert bob.claim("item") is not None


def test_expired_lease_is_taken_over_and_old_owner_loses_it(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    alice = LeaseManager(store, "remote-host:1:a", ttl_s=0.2)
    bob = LeaseManager(store, "remote-host:2:b", ttl_s=30)
    lease = alice.claim("item")
    assert lease is not None
    time.sleep(0.3)
    taken = bob.claim("item")
    assert taken is not None
    assert not alice.renew(lease) and lease.lost
    alice.release(lease)  # a lost lease is not deleted: it is bob's now
    record = json.loads(store.read_bytes(f"{LEASES_DIR}/item.json") or b"{}")
    assert record["owner"] == "remote-host:2:b"


def test_dead_local_owner_does_not_block(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    ghost = LeaseManager(store, f"{socket.gethostname()}:999999999:x", ttl_s=300)
    assert ghost.claim("item") is not None
    assert LeaseManager(store, f"{socket.gethostname()}:1:z").claim("item") is not None


def test_a_dead_local_owners_lease_is_not_active(tmp_path: Path) -> None:
    """A worker killed after committing an item but before giving up its lease leaves the
    lease behind (nobody claims a done item again): ``ocrflow status`` must not list it."""
    store = LocalStore(tmp_path)
    ghost = LeaseManager(store, f"{socket.gethostname()}:999999999:x", ttl_s=300)
    living = LeaseManager(store, f"{socket.gethostname()}:{os.getpid()}:y", ttl_s=300)
    remote = LeaseManager(store, "remote-host:999999999:r", ttl_s=300)
    assert ghost.claim("done-item") is not None
    assert living.claim("item") is not None
    assert remote.claim("remote-item") is not None  # another host: only expiry ends it
    owners = sorted(str(a["owner"]) for a in living.active())
    assert owners == sorted([living.owner, remote.owner])


def test_one_winner_among_racing_claims(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    winners: list[str] = []
    barrier = threading.Barrier(8)

    def race(n: int) -> None:
        manager = LeaseManager(store, f"remote-host:{n}:r", ttl_s=30)
        barrier.wait()
        if manager.claim("contested") is not None:
            winners.append(manager.owner)

    threads = [threading.Thread(target=race, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(winners) == 1


def test_host_id_override_makes_leases_ttl_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = LocalStore(tmp_path)
    dead_here = LeaseManager(store, f"{socket.gethostname()}:999999999:x", ttl_s=300)
    assert dead_here.claim("item") is not None
    monkeypatch.setenv(HOST_ID_VARIABLE, "elsewhere")
    assert new_owner().startswith(f"elsewhere:{os.getpid()}:")
    # The holder's host is no longer ours: its dead pid says nothing, only the expiry does.
    assert LeaseManager(store, new_owner()).claim("item") is None
    ghost = LeaseManager(store, "elsewhere:999999999:y", ttl_s=300)
    assert ghost.claim("other") is not None
    assert LeaseManager(store, new_owner()).claim("other") is not None  # same host id, dead pid


def test_confirm_renews_and_raises_once_taken_over(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    alice = LeaseManager(store, "remote-host:1:a", ttl_s=0.3)
    lease = alice.claim("item")
    assert lease is not None
    first_expiry = lease.expires
    time.sleep(0.1)
    alice.confirm(lease)
    assert lease.expires > first_expiry and not lease.lost
    time.sleep(0.4)
    assert LeaseManager(store, "remote-host:2:b").claim("item") is not None
    with pytest.raises(LeaseLost):
        alice.confirm(lease)
    assert lease.lost


def test_heartbeat_keeps_lease_past_several_ttls(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    alice = LeaseManager(store, "remote-host:1:a", ttl_s=0.3)
    bob = LeaseManager(store, "remote-host:2:b", ttl_s=0.3)
    lease = alice.claim("item")
    assert lease is not None

    async def slow_item() -> list[object]:
        attempts = []
        async with alice.held(lease):
            for _ in range(12):  # 1.2 s: four TTLs
                await asyncio.sleep(0.1)
                attempts.append(await asyncio.to_thread(bob.claim, "item"))
        return attempts

    assert asyncio.run(slow_item()) == [None] * 12
    assert not lease.lost


def test_heartbeat_cancels_the_item_when_the_lease_is_taken_over(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    alice = LeaseManager(store, "remote-host:1:a", ttl_s=0.3)
    lease = alice.claim("item")
    assert lease is not None
    reached: list[str] = []

    async def item() -> None:
        async with alice.held(lease):
            # As if alice had been paused past the expiry and bob had taken the item over.
            store.write_bytes(lease.key, json.dumps({"owner": "remote-host:2:b"}).encode())
            await asyncio.sleep(5)
            reached.append("end")

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(item())
    assert lease.lost and reached == []  # stopped, not run to its end
    alice.release(lease)  # not ours any more: left in place
    assert json.loads(store.read_bytes(lease.key) or b"{}")["owner"] == "remote-host:2:b"


class FlakyStore(LocalStore):
    """A local store whose conditional writes fail with an I/O error a few times."""

    def __init__(self, root: Path, failures: int) -> None:
        super().__init__(root)
        self.failures = failures

    def write_if_match(self, key: str, data: bytes, etag: str | None) -> bool:
        if etag is not None and self.failures > 0:
            self.failures -= 1
            raise OutputError(key, "Input/output error")
        return super().write_if_match(key, data, etag)


def test_heartbeat_survives_store_errors(tmp_path: Path) -> None:
    store = FlakyStore(tmp_path, failures=2)
    alice = LeaseManager(store, "remote-host:1:a", ttl_s=0.3)
    lease = alice.claim("item")
    assert lease is not None
    claimed_until = lease.expires

    async def item() -> None:
        async with alice.held(lease):
            await asyncio.sleep(0.8)

    asyncio.run(item())
    assert store.failures == 0 and not lease.lost
    assert lease.expires > claimed_until  # renewed again after the errors


def test_release_wins_over_a_late_renewal(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    alice = LeaseManager(store, "remote-host:1:a", ttl_s=30)
    lease = alice.claim("item")
    assert lease is not None
    alice.release(lease)
    assert not alice.renew(lease)  # a heartbeat finishing late must not bring it back
    assert store.read_bytes(lease.key) is None


def test_a_process_stopped_inside_a_lease_lock_stops_nobody(tmp_path: Path) -> None:
    """A worker frozen while it holds a lease's lock (SIGSTOP, a paused container) must not
    freeze the others: past the wait, the lease counts as someone else's, and nobody writes
    over it; once the frozen process goes on, the lease can be taken again."""
    store = LocalStore(tmp_path, lock_wait_s=0.5)
    alice = LeaseManager(store, "remote-host:1:a", ttl_s=0.2)
    bob = LeaseManager(store, "remote-host:2:b", ttl_s=30)
    lease = alice.claim("item")
    assert lease is not None
    before = store.read_bytes(lease.key)
    lock = Path(store.url(lease.key) + ".lock")
    frozen = subprocess.Popen(
        [sys.executable, "-c", _HOLD_AND_STOP, str(lock)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert frozen.stdout is not None and frozen.stdout.readline() == "locked\n"
        _wait_stopped(frozen.pid)
        time.sleep(0.3)  # alice's lease has expired
        start = time.monotonic()
        assert bob.claim("item") is None
        assert not alice.renew(lease) and lease.lost
        assert time.monotonic() - start < 5
        assert store.read_bytes(lease.key) == before
    finally:
        os.kill(frozen.pid, signal.SIGCONT)
        frozen.communicate(timeout=30)
    assert bob.claim("item") is not None


_HOLD_AND_STOP = """
import fcntl, os, signal, sys
handle = open(sys.argv[1], "a+b")
fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
print("locked", flush=True)
os.kill(os.getpid(), signal.SIGSTOP)
"""


def _wait_stopped(pid: int) -> None:
    end = time.monotonic() + 30
    while Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "T":
        assert time.monotonic() < end, "the child never stopped"
        time.sleep(0.01)
