"""Parquet shards a worker writes into a store: ``<prefix>/<worker>-<n>.parquet``, each of
bounded size, ``n`` zero-padded and continuing after the worker's shards of earlier runs.

Each shard is written whole through ``Store.write_bytes``, so it is atomic (temp file +
rename locally, one PUT on an object store). The Parquet sink (``sinks/parquet.py``) and the
dataset write-back (``sinks/dataset_writeback.py``) both write through ``ShardWriter``.
"""

from __future__ import annotations

import io
import re
import time
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ocrflow.storage.local import Store

PARQUET_DIR = "parquet"


_SHARD_NAME = re.compile(r"^(?P<worker>.+)-(?P<n>\d+)\.parquet$")


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


# -- shards ------------------------------------------------------------------------------
def shard_key(worker: str, number: int, prefix: str = PARQUET_DIR) -> str:
    """``parquet/<worker>-<n>.parquet``, ``n`` zero-padded to five digits."""
    return f"{prefix}/{worker}-{number:05d}.parquet" if prefix else f"{worker}-{number:05d}.parquet"


def safe_worker_name(worker: str) -> str:
    """A worker name usable in a file name (no slashes, no spaces)."""
    return _UNSAFE.sub("_", worker).strip("._") or "worker"


def worker_shards(store: Store, worker: str, prefix: str = PARQUET_DIR) -> dict[str, int]:
    """This worker's shards and their numbers."""
    return {
        key: int(match["n"])
        for key in shard_keys(store, prefix)
        if (match := _SHARD_NAME.match(key.rsplit("/", 1)[-1])) and match["worker"] == worker
    }


def next_shard_number(store: Store, worker: str, prefix: str = PARQUET_DIR) -> int:
    """One past the highest shard number this worker has written (0 when none)."""
    return max(worker_shards(store, worker, prefix).values(), default=-1) + 1


def shard_keys(store: Store, prefix: str = PARQUET_DIR) -> list[str]:
    """Every shard under ``parquet/`` (or ``prefix``), sorted by name."""
    keys = store.list(prefix) if prefix else store.list("")
    return [k for k in keys if k.endswith(".parquet") and (prefix or "/" not in k)]


def table_bytes(table: pa.Table) -> bytes:
    """A whole Parquet file in memory (zstd), to be written in one atomic call."""
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd")
    return sink.getvalue()


@dataclass(frozen=True, slots=True)
class ShardLimits:
    """When a buffer becomes a shard: whichever limit is reached first."""

    max_rows: int = 256
    max_bytes: int = 64 << 20
    #: Seconds a row may wait in the buffer (its done marker waits with it).
    max_age_s: float = 300.0


class ShardWriter:
    """Buffers rows of one schema and writes them as numbered shards of one worker."""

    def __init__(
        self,
        store: Store,
        worker: str,
        schema: pa.Schema,
        limits: ShardLimits | None = None,
        *,
        prefix: str = PARQUET_DIR,
        first_number: int | None = None,
    ) -> None:
        self.store = store
        self.prefix = prefix
        self.worker = safe_worker_name(worker)
        self.schema = schema
        self.limits = limits or ShardLimits()
        self._rows: list[dict[str, Any]] = []
        self._ids: list[str] = []
        self._bytes = 0
        self._since = 0.0
        # ``None``: continue after the worker's existing shards (asked at the first flush).
        self._next: int | None = first_number
        self.written: list[str] = []

    def add(self, row: dict[str, Any], commit_id: str, size: int) -> list[str]:
        """Buffer a row; returns the ids committed by a flush this caused (else ``[]``)."""
        if not self._rows:
            self._since = time.monotonic()
        self._rows.append(row)
        self._ids.append(commit_id)
        self._bytes += size
        return self.flush() if self._full() else []

    def _full(self) -> bool:
        limits = self.limits
        return (
            len(self._rows) >= limits.max_rows
            or self._bytes >= limits.max_bytes
            or time.monotonic() - self._since >= limits.max_age_s
        )

    def flush(self) -> list[str]:
        """Write the buffer as the next shard; returns the ids it holds."""
        if not self._rows:
            return []
        if self._next is None:  # asked lazily: the sink may be made before OUT exists
            self._next = next_shard_number(self.store, self.worker, self.prefix)
        table = pa.Table.from_pylist(self._rows, schema=self.schema)
        key = shard_key(self.worker, self._next, self.prefix)
        self.store.write_bytes(key, table_bytes(table))
        self._next += 1
        self.written.append(key)
        ids, self._rows, self._ids, self._bytes = self._ids, [], [], 0
        return ids


def release_arrow_memory_promptly() -> None:
    """Allocate Arrow buffers with the C library's allocator instead of Arrow's default pool.

    jemalloc/mimalloc (Arrow's default pools) keep freed pages for reuse: a long run that
    builds a shard every few hundred documents grew by ~20 kB a document although nothing
    was held (measured: 2,000 documents, 165 -> 225 MiB; with jemalloc's decay at 0 still
    205 MiB; with the system pool flat at ~150 MiB). A process-wide allocator setting, so
    it is made where this process first uses Arrow for a run.
    """
    pa.set_memory_pool(pa.system_memory_pool())
