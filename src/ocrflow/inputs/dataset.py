"""Datasets as input: rows of Parquet files or a ``save_to_disk`` folder, each a document.

A row's document is an image (Hugging Face ``Image``/``Pdf`` feature: a struct of ``bytes``
and ``path``) or raw bytes of a PDF or image (a binary column). Rows stream in record batches
(``ParquetFile.iter_batches``, the Arrow IPC stream reader for ``save_to_disk`` shards): memory
holds one batch, whatever the dataset's size. The ``datasets`` library is not needed.

Recognising a dataset (``dataset_files``) needs no pyarrow; reading its rows does.
The write-back of the rows with ``markdown`` and ``ocr_status`` added is
``sinks/dataset_writeback.py``.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import posixpath
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import pyarrow as pa
import pyarrow.parquet as pq

from ocrflow.config.access import AccessPolicy, read_capped
from ocrflow.errors import ConfigError, SourceError
from ocrflow.inputs.dataset_files import (
    DatasetFiles,
    dataset_files,
    is_local,
)
from ocrflow.inputs.source import RowRef, Source, row_uri, sniff_kind
from ocrflow.storage.shards import (
    release_arrow_memory_promptly,
)
from ocrflow.types import Reason

RowKind = Literal["image", "pdf", "missing"]


HF_METADATA_KEY = b"huggingface"


@dataclass(frozen=True, slots=True)
class DatasetRow:
    """One row as a document.

    ``row_id`` is the id column's value (or ``<shard stem>-<index>``); ``doc_id`` a stable
    24-hex id for workspace keys; ``columns`` holds every input column (the document column
    as stored) for ``write_back``; ``shard`` and ``index`` say where the row lives.
    """

    row_id: str
    doc_id: str
    data: bytes
    kind: RowKind
    shard: str
    index: int
    columns: dict[str, Any] = field(repr=False)


@contextlib.contextmanager
def _dataset_errors(location: str) -> Iterator[None]:
    """A shard that is not Parquet or Arrow (a corrupt upload) as a ``SourceError``."""
    try:
        yield
    except (pa.ArrowException, OSError, ValueError) as exc:
        text = exc.strerror if isinstance(exc, OSError) else str(exc)  # no server paths
        detail = text.splitlines()[0] if text else type(exc).__name__
        name = posixpath.basename(location.rstrip("/")) or location
        raise SourceError(f"cannot read the dataset {name}: {detail}") from None


# -- schema and columns ------------------------------------------------------------------
def dataset_schema(files: DatasetFiles) -> pa.Schema:
    """The schema of the first shard (with its Hugging Face metadata)."""
    with files.fs.open(files.paths[0], "rb") as handle:
        if files.format == "parquet":
            return pq.ParquetFile(handle).schema_arrow
        return pa.ipc.open_stream(handle).schema


def _is_document_type(kind: pa.DataType) -> bool:
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        return True
    if pa.types.is_struct(kind):
        names = {kind.field(i).name: kind.field(i).type for i in range(kind.num_fields)}
        return "bytes" in names and _is_document_type(names["bytes"])
    return False


def choose_column(schema: pa.Schema, column: str | None) -> str:
    """The column holding documents: ``column`` if given, else the only candidate."""
    listing = ", ".join(f"{f.name} ({f.type})" for f in schema)
    if column is not None:
        if column not in schema.names:
            raise ConfigError(f"dataset has no column {column!r}; columns: {listing}")
        if not _is_document_type(schema.field(column).type):
            raise ConfigError(f"column {column!r} holds no image or PDF bytes; columns: {listing}")
        return column
    candidates = [f.name for f in schema if _is_document_type(f.type)]
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        raise ConfigError(f"dataset has no image or binary column; columns: {listing}")
    raise ConfigError(
        f"dataset has several image/binary columns ({', '.join(candidates)}): "
        "pick one with --dataset-column"
    )


def _check_id_column(schema: pa.Schema, id_column: str | None) -> None:
    if id_column is not None and id_column not in schema.names:
        raise ConfigError(f"dataset has no id column {id_column!r}; columns: {schema.names}")


# -- reading -----------------------------------------------------------------------------
def record_batches(
    files: DatasetFiles, path: str, batch_size: int, columns: list[str] | None = None
) -> Iterator[pa.RecordBatch]:
    """The shard's rows in batches; ``columns``: read only these (Parquet reads no others)."""
    with files.fs.open(path, "rb") as handle:
        if files.format == "parquet":
            yield from pq.ParquetFile(handle).iter_batches(batch_size=batch_size, columns=columns)
            return
        for batch in pa.ipc.open_stream(handle):
            if columns is not None:
                batch = batch.select(columns)
            for start in range(0, batch.num_rows, batch_size):
                yield batch.slice(start, batch_size)


def _absolute(location: str) -> str:
    """Local locations made absolute: a row URI must name the same rows from any directory."""
    if "://" in location and not location.startswith("file://"):
        return location
    return os.path.abspath(location.removeprefix("file://"))


def iter_row_sources(
    location: str,
    *,
    column: str | None = None,
    id_column: str | None = None,
    batch_size: int = 64,
    access: AccessPolicy | None = None,
) -> Iterator[Source]:
    """One ``Source`` a row (``uri`` from ``row_uri``, ``rel`` the row id, ``kind`` sniffed,
    ``size`` the document's bytes), reading only the document and id columns, one batch at
    a time; no row's bytes are kept. A row naming a file ``access`` refuses (or one over
    its cap) gets that reason as its kind (``sources.refusal``): it fails unread.
    ``SourceError`` when a shard is not readable Parquet or Arrow."""
    release_arrow_memory_promptly()
    location = _absolute(location)
    with _dataset_errors(location):
        files = dataset_files(location, access)
        column = choose_column(dataset_schema(files), column)
        _check_id_column(dataset_schema(files), id_column)
        wanted = [column] + ([id_column] if id_column and id_column != column else [])
        for path in files.paths:
            shard = posixpath.relpath(path, files.root)
            index = 0
            for batch in record_batches(files, path, batch_size, wanted):
                for values in batch.to_pylist():
                    row_id = _row_id(shard, index, values.get(id_column) if id_column else None)
                    ref = RowRef(location, shard, index, row_id)
                    yield _row_source(files, ref, values.get(column))
                    index += 1


def _row_source(files: DatasetFiles, ref: RowRef, value: Any) -> Source:
    try:
        data = document_bytes(files, ref.shard, value)
    except SourceError as exc:  # refused or too large: the document fails with the reason
        return Source(row_uri(ref), ref.row_id, str(exc.reason), 0)
    return Source(row_uri(ref), ref.row_id, sniff_kind(data[:1024]), len(data))


def _row_id(shard: str, index: int, value: Any) -> str:
    if value is not None:
        return str(value)
    return f"{posixpath.splitext(posixpath.basename(shard))[0]}-{index}"


def iter_dataset_rows(
    location: str,
    *,
    column: str | None = None,
    id_column: str | None = None,
    batch_size: int = 32,
    access: AccessPolicy | None = None,
) -> Iterator[DatasetRow]:
    """Every row of the dataset at ``location`` as a document, one batch in memory at once
    (a row naming a file ``access`` refuses has no bytes)."""
    files = dataset_files(location, access)
    schema = dataset_schema(files)
    column = choose_column(schema, column)
    _check_id_column(schema, id_column)
    for path in files.paths:
        shard = posixpath.relpath(path, files.root)
        index = 0
        for batch in record_batches(files, path, batch_size):
            for columns in batch.to_pylist():
                yield _row(files, shard, index, columns, column, id_column)
                index += 1


def _row(
    files: DatasetFiles,
    shard: str,
    index: int,
    columns: dict[str, Any],
    column: str,
    id_column: str | None,
) -> DatasetRow:
    value = columns.get(id_column) if id_column is not None else None
    row_id = _row_id(shard, index, value)
    identity = f"id:{row_id}" if value is not None else f"row:{shard}#{index}"
    try:
        data = document_bytes(files, shard, columns.get(column))
    except SourceError:
        data = b""  # refused or too large: written back as a row without Markdown
    kind = sniff_kind(data[:1024])
    return DatasetRow(
        row_id=row_id,
        doc_id=hashlib.sha256(identity.encode()).hexdigest()[:24],
        data=data,
        kind="pdf" if kind == "pdf" else "image" if data else "missing",
        shard=shard,
        index=index,
        columns=columns,
    )


def document_bytes(files: DatasetFiles, shard: str, value: Any) -> bytes:
    """The bytes of a cell: raw binary, an Image struct's bytes, or the file its path names
    (``AccessRefused`` when the policy does not allow it)."""
    if isinstance(value, bytes):
        return value
    if not isinstance(value, dict):
        return b""
    if value.get("bytes"):
        return bytes(value["bytes"])
    path = value.get("path")
    if not path or not isinstance(path, str):
        return b""
    return _row_file(files, shard, path)


def _row_file(files: DatasetFiles, shard: str, path: str) -> bytes:
    """The file a row names (relative: to its shard's folder), as the policy allows it:
    regular files only, at most the policy's cap read; ``b""`` when it cannot be read."""
    access, local = files.access, is_local(files)
    folder = posixpath.join(files.root, posixpath.dirname(shard))
    dataset = files.root if local else files.fs.unstrip_protocol(files.root)
    target = access.check_row_path(
        dataset, folder if local else files.fs.unstrip_protocol(folder), path
    )
    try:
        if local and "://" not in target:
            return access.read_file(target)
        with files.fs.open(target, "rb") as handle:
            return read_capped(handle, path, access.max_file_bytes)
    except (OSError, ValueError):  # ValueError: a NUL in the path
        return b""  # recorded as a missing document, not a crash of the batch
    except SourceError as exc:
        if exc.reason == Reason.UNREADABLE:
            return b""
        raise
