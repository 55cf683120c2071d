from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from ocrflow.leases import LEASES_DIR, LeaseManager
from ocrflow.storage import LocalStore


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
    import socket

    store = LocalStore(tmp_path)
    ghost = LeaseManager(store, f"{socket.gethostname()}:999999999:x", ttl_s=300)
    assert ghost.claim("item") is not None
    assert LeaseManager(store, f"{socket.gethostname()}:1:z").claim("item") is not None


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
