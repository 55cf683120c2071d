"""Leases: a worker owns an item while it keeps renewing the lease; an expired lease is
taken over by whoever asks next. Ownership changes only through conditional writes
(create-if-absent, write-if-version-matches), so two workers never both hold an item.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from ocrflow.storage import Store

log = logging.getLogger("ocrflow.leases")
LEASES_DIR = ".ocrflow/leases"


@dataclass
class Lease:
    """A held lease; ``etag`` is the version we last wrote (needed to renew it)."""

    key: str
    owner: str
    etag: str | None
    expires: float
    lost: bool = False


def _live(record: dict[str, object]) -> bool:
    """Unexpired, and not held by a process of this machine that no longer exists (a killed
    ``ocrflow run`` restarted on the same host need not wait out its own old leases)."""
    if float(record.get("expires", 0)) <= time.time():  # type: ignore[arg-type]
        return False
    host, _, rest = str(record.get("owner", "")).partition(":")
    pid = rest.partition(":")[0]
    if host == socket.gethostname() and pid.isdigit():
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
        return json.dumps({"owner": self.owner, "expires": expires, "ttl_s": self.ttl_s}).encode()

    def claim(self, item_id: str) -> Lease | None:
        """Take the item's lease if it is free or expired; ``None`` if someone holds it."""
        key = f"{LEASES_DIR}/{item_id}.json"
        expires = time.time() + self.ttl_s
        current, etag = self.store.read_with_version(key)
        if current is not None and _live(json.loads(current)):
            return None
        if current is not None:
            log.info(
                "taking over expired lease %s from %s", item_id, json.loads(current).get("owner")
            )
        if not self.store.write_if_match(key, self._body(expires), etag):
            return None
        _, new_etag = self.store.read_with_version(key)
        return Lease(key, self.owner, new_etag, expires)

    def renew(self, lease: Lease) -> bool:
        """Push the expiry forward; ``False`` (and ``lease.lost``) if it was taken over."""
        expires = time.time() + self.ttl_s
        if not self.store.write_if_match(lease.key, self._body(expires), lease.etag):
            lease.lost = True
            return False
        _, lease.etag = self.store.read_with_version(lease.key)
        lease.expires = expires
        return True

    def release(self, lease: Lease) -> None:
        """Give the lease up (after the item's done marker is written)."""
        if not lease.lost:
            self.store.delete(lease.key)

    def active(self) -> list[dict[str, object]]:
        """Leases that have not expired: who works on what right now."""
        now = time.time()
        found = []
        for key in self.store.list(LEASES_DIR):
            blob = self.store.read_bytes(key)
            record = json.loads(blob) if blob else {}
            if record.get("expires", 0) > now:
                found.append({"item": key.rsplit("/", 1)[-1].removesuffix(".json"), **record})
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
                if not await asyncio.to_thread(self.renew, lease):
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
