"""Reading a dataset's rows again by reference, in input order: ``RowCursor`` walks the
rows forward one record batch at a time (the write-back's order), and ``RowFetcher`` gets
one row's document bytes for a worker that was handed a row reference
(``<dataset>#row=<shard>:<index>``). Memory holds one batch, whatever the dataset's size.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import tempfile
import threading
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from ocrflow.config.access import AccessPolicy
from ocrflow.errors import ConfigError, SourceError
from ocrflow.inputs.dataset import (
    ROW_COPY_PREFIX,
    DatasetFiles,
    choose_column,
    dataset_files,
    dataset_schema,
    document_bytes,
    record_batches,
)
from ocrflow.inputs.source import RowRef, parse_row_uri
from ocrflow.storage.shards import (
    release_arrow_memory_promptly,
)


# -- fetching rows for workers -----------------------------------------------------------
class RowCursor:
    """Reads rows of one dataset forward, holding one batch of one column of one shard.

    ``fetch`` moves forward to the asked row; an earlier row, or another shard, reopens (a
    Parquet shard at the row group holding the row). Workers take items roughly in manifest
    order, so a run reads each shard about once. Not thread-safe: ``RowFetcher`` locks.
    """

    def __init__(self, files: DatasetFiles, column: str, *, batch_size: int = 16) -> None:
        release_arrow_memory_promptly()  # batches come and go all run long
        self.files = files
        self.column = column
        self.batch_size = batch_size
        self.reopens = 0
        self._shard: str | None = None
        self.record_batches: Iterator[pa.RecordBatch] = iter(())
        self._batch: pa.Array | None = None
        self._start = 0

    @property
    def held_rows(self) -> int:
        """Rows of the batch in memory now (at most ``batch_size``)."""
        return 0 if self._batch is None else len(self._batch)

    def fetch(self, shard: str, index: int) -> bytes:
        """The document bytes of row ``index`` of ``shard`` (``b""`` when the cell is empty)."""
        if shard != self._shard or self._batch is None or index < self._start:
            self._open(shard, index)
        assert self._batch is not None
        while index >= self._start + len(self._batch):
            self._start += len(self._batch)
            batch = next(self.record_batches, None)
            if batch is None:
                self._batch = None
                raise SourceError(f"{shard} has no row {index}")
            self._batch = batch.column(0)
        return document_bytes(self.files, shard, self._batch[index - self._start].as_py())

    def _open(self, shard: str, index: int) -> None:
        path = posixpath.join(self.files.root, shard)
        if path not in self.files.paths:
            raise SourceError(f"the dataset has no shard {shard}")
        if self._shard is not None:
            self.reopens += 1
        self._shard, self._start = shard, 0
        if self.files.format == "parquet":
            self.record_batches = self._parquet_from(path, index)
        else:
            self.record_batches = record_batches(self.files, path, self.batch_size, [self.column])
        first = next(self.record_batches, None)
        self._batch = first.column(0) if first is not None else pa.array([], pa.binary())

    def _parquet_from(self, path: str, index: int) -> Iterator[pa.RecordBatch]:
        """Batches from the row group holding ``index`` (earlier groups are skipped)."""
        with self.files.fs.open(path, "rb") as handle:
            parquet = pq.ParquetFile(handle)
            groups = [parquet.metadata.row_group(g).num_rows for g in range(parquet.num_row_groups)]
            first = 0
            while first < len(groups) - 1 and self._start + groups[first] <= index:
                self._start += groups[first]
                first += 1
            yield from parquet.iter_batches(
                batch_size=self.batch_size,
                row_groups=range(first, len(groups)),
                columns=[self.column],
            )


class RowFetcher:
    """A worker's local copies of its documents: a dataset row is written to a temporary
    file from a ``RowCursor`` (one per dataset, kept across documents); anything else goes
    to ``remote.local_copy``. Thread-safe (documents are fetched from worker threads)."""

    def __init__(self, column: str | None = None, access: AccessPolicy | None = None) -> None:
        self.column = column
        #: Checked again at each read: a link may have changed since the run was planned.
        self.access = access or AccessPolicy()
        self._cursors: dict[str, RowCursor] = {}
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def local_copy(self, uri: str) -> Iterator[str]:
        """A local path holding ``uri``'s bytes, removed on exit when it is a copy."""
        ref = parse_row_uri(uri)
        if ref is None:
            from ocrflow.inputs.remote import local_copy

            with local_copy(uri, access=self.access) as path:
                yield path
            return
        data = self.fetch(ref)
        fd, tmp = tempfile.mkstemp(prefix=ROW_COPY_PREFIX)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            del data
            yield tmp
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)

    def fetch(self, ref: RowRef) -> bytes:
        """The bytes of the row ``ref`` names; ``SourceError`` when it cannot be read."""
        with self._lock:
            try:
                return self._cursor(ref.location).fetch(ref.shard, ref.index)
            except (OSError, pa.ArrowException, ConfigError) as exc:
                raise SourceError(f"cannot read row {ref.index} of {ref.shard}: {exc}") from exc

    def _cursor(self, location: str) -> RowCursor:
        if location not in self._cursors:
            files = dataset_files(location, self.access)
            column = choose_column(dataset_schema(files), self.column)
            self._cursors[location] = RowCursor(files, column)
        return self._cursors[location]
