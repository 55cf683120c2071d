"""Reading a dataset's rows again by reference, in input order: ``RowCursor`` walks the
rows forward one record batch at a time (the write-back's order), and ``fetch_row`` gets
one row's document bytes for a worker that was handed a row reference
(``<dataset>#row=<shard>:<index>``, through ``inputs.copies.RowFetcher``). Memory holds one
batch, whatever the dataset's size.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from ocrflow.config.access import AccessPolicy
from ocrflow.errors import ConfigError, SourceError
from ocrflow.inputs.dataset import (
    choose_column,
    dataset_schema,
    document_bytes,
    record_batches,
)
from ocrflow.inputs.dataset_files import DatasetFiles, dataset_files
from ocrflow.inputs.source import RowRef
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


def open_cursor(location: str, column: str | None, access: AccessPolicy) -> RowCursor:
    """A cursor over the document column of the dataset at ``location`` (``column``, or
    the one column that holds documents)."""
    files = dataset_files(location, access)
    return RowCursor(files, choose_column(dataset_schema(files), column))


def fetch_row(cursors: dict[str, RowCursor], ref: RowRef, column: str | None,
              access: AccessPolicy) -> bytes:  # fmt: skip
    """The bytes of the row ``ref`` names, through the cursor of its dataset in ``cursors``
    (opened and kept there on first use); ``SourceError`` when it cannot be read."""
    try:
        if ref.location not in cursors:
            cursors[ref.location] = open_cursor(ref.location, column, access)
        return cursors[ref.location].fetch(ref.shard, ref.index)
    except (OSError, pa.ArrowException, ConfigError) as exc:
        raise SourceError(f"cannot read row {ref.index} of {ref.shard}: {exc}") from exc
