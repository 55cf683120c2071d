"""Leases: a worker owns an item while it keeps renewing the lease; an expired lease is
taken over by whoever asks next. Ownership changes only through conditional writes
(create-if-absent, write-if-version-matches), so two workers never both hold an item.

A lease names its owner ``host:pid:random``. A lease of a process on *this* host is also
free once that process is gone (a killed run restarted here need not wait out its leases);
on another host only the expiry can tell. ``OCRFLOW_HOST_ID`` overrides the host part (see
``host_id``). A worker that was paused past its expiry (SIGSTOP, a VM freeze, a long GC)
may find its item taken over: ``LeaseManager.confirm`` right before committing tells it to
drop its work instead of writing the item a second time.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from ocrflow.config.environment import HOST_ID_VARIABLE, setting
from ocrflow.errors import OcrflowError, WorkspaceError
from ocrflow.storage.local import Store
from ocrflow.workspace.records import LeaseRecord

log = logging.getLogger("ocrflow.leases")
LEASES_DIR = ".ocrflow/leases"


class LeaseLost(WorkspaceError):
    """Another worker took the item over (our lease expired unrenewed): drop the work."""


@dataclass
class Lease:
    """A held lease; ``etag`` is the version we last wrote (needed to renew it).

    ``lock`` serialises renewals and the release of one lease: the heartbeat and the check
    before a commit both renew, and each must see the version the other wrote.
    """

    key: str
    owner: str
    etag: str | None
    expires: float
    lost: bool = False
    released: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)


def host_id() -> str:
    """This machine's name in lease owners: ``$OCRFLOW_HOST_ID`` when set, else the hostname.

    Leases of processes with the same host id are also judged by whether their pid still
    runs, so set it where that would be wrong: containers that share a hostname but not a
    pid namespace need distinct ids. Tests set it in a child process to play a worker on
    another host, whose lease only its expiry can end.
    """
    return setting(HOST_ID_VARIABLE) or socket.gethostname()


def new_owner() -> str:
    """A unique owner name for a worker in this process: ``host:pid:random``."""
    return f"{host_id()}:{os.getpid()}:{uuid.uuid4().hex[:4]}"


def _holder(blob: bytes | None) -> LeaseRecord | None:
    """The lease record in ``blob``; an unreadable one (a torn write on a store without
    atomic writes) counts as no holder, so the lease can be taken over."""
    if not blob:
        return None
    try:
        return LeaseRecord.load(blob)
    except ValueError:
        return None


def _live(record: LeaseRecord) -> bool:
    """Unexpired, and not held by a process of this host that no longer exists (a killed
    ``ocrflow run`` restarted on the same host need not wait out its own old leases)."""
    if record.expires <= time.time():
        return False
    host, _, rest = record.owner.partition(":")
    pid = rest.partition(":")[0]
    if host == host_id() and pid.isdigit():
        return _pid_alive(int(pid))
    return True


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class LeaseManager:
    """Claims, renews and releases item leases for one worker."""

    def __init__(self, store: Store, owner: str, *, ttl_s: float = 120.0) -> None:
        self.store = store
        self.owner = owner
        self.ttl_s = ttl_s

    def _body(self, expires: float) -> bytes:
        return LeaseRecord(owner=self.owner, expires=expires, ttl_s=self.ttl_s).dump()

    def claim(self, item_id: str) -> Lease | None:
        """Take the item's lease if it is free or expired; ``None`` if someone holds it."""
        key = f"{LEASES_DIR}/{item_id}.json"
        expires = time.time() + self.ttl_s
        current, etag = self.store.read_with_version(key)
        holder = _holder(current)
        if holder is not None and _live(holder):
            return None
        if current is not None:
            log.info(
                "taking over expired lease %s from %s", item_id, holder.owner if holder else "?"
            )
        if not self.store.write_if_match(key, self._body(expires), etag):
            return None
        _, new_etag = self.store.read_with_version(key)
        return Lease(key, self.owner, new_etag, expires)

    def renew(self, lease: Lease) -> bool:
        """Push the expiry forward; ``False`` (and ``lease.lost``) if it was taken over."""
        with lease.lock:
            if lease.lost or lease.released:
                return False
            expires = time.time() + self.ttl_s
            if not self.store.write_if_match(lease.key, self._body(expires), lease.etag):
                lease.lost = True
                return False
            _, lease.etag = self.store.read_with_version(lease.key)
            lease.expires = expires
            return True

    def confirm(self, lease: Lease) -> None:
        """Make sure the lease is still ours right before committing the item's outputs.

        Renewing is a write conditional on the version we hold, so it fails if anyone took
        the item over meanwhile (we were paused past the expiry), and it gives the commit a
        whole TTL in which nobody can. Raises ``LeaseLost`` when the item is no longer ours.
        """
        if not self.renew(lease):
            raise LeaseLost(f"lease {lease.key} was taken over by another worker")

    def release(self, lease: Lease) -> None:
        """Give the lease up (after the item's done marker is written)."""
        with lease.lock:
            if not lease.lost and not lease.released:
                self.store.delete(lease.key)
            lease.released = True

    def active(self) -> list[dict[str, object]]:
        """Leases that still hold: who works on what right now. Not an expired one, nor one
        of a process of this host that no longer runs (a worker killed between committing
        an item and giving up its lease leaves that lease behind, and nobody claims a done
        item again to clear it)."""
        found = []
        for key in self.store.list(LEASES_DIR):
            blob = self.store.read_bytes(key)
            record = _holder(blob)
            if record is not None and _live(record):
                item = key.rsplit("/", 1)[-1].removesuffix(".json")
                found.append({"item": item, **record.model_dump()})
        return found

    @contextlib.asynccontextmanager
    async def held(self, lease: Lease) -> AsyncIterator[Lease]:
        """Renew ``lease`` in the background while the body runs; cancel the body if the
        lease is lost (another worker took it over: its output would duplicate ours)."""
        body = asyncio.current_task()
        assert body is not None

        async def heartbeat() -> None:
            while True:
                await asyncio.sleep(self.ttl_s / 3)
                try:
                    kept = await asyncio.to_thread(self.renew, lease)
                except (OcrflowError, OSError) as exc:
                    # A store hiccup: try again at the next beat. Should the lease expire and
                    # be taken meanwhile, the next renewal (or ``confirm``) finds out.
                    log.warning("could not renew lease %s: %s", lease.key, exc)
                    continue
                if not kept:
                    log.warning("lease %s lost; abandoning the item", lease.key)
                    body.cancel()
                    return

        beat = asyncio.get_running_loop().create_task(heartbeat())
        try:
            yield lease
        finally:
            beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beat


async def claim_in_thread(manager: LeaseManager, claim: Callable[[], Lease | None]) -> Lease | None:
    """Run ``claim`` (a blocking claim of ``manager``'s) in a thread. Cancelled meanwhile
    (a job service stops a job's work), the claim still completes in its thread: the lease
    it took is released then, not left held by a live process until it expires."""
    pending = asyncio.ensure_future(asyncio.to_thread(claim))
    try:
        return await asyncio.shield(pending)
    except asyncio.CancelledError:
        pending.add_done_callback(functools.partial(_give_back, manager))
        raise


def _give_back(manager: LeaseManager, claimed: asyncio.Future[Lease | None]) -> None:
    lease = None if claimed.cancelled() or claimed.exception() else claimed.result()
    if lease is None:
        return
    try:
        asyncio.get_running_loop().run_in_executor(None, manager.release, lease)
    except RuntimeError:  # the loop is closing: a small delete, done here
        manager.release(lease)
