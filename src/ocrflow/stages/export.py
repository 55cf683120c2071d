"""Convert a finished OUT into Parquet shards or a folder ``datasets.load_from_disk`` opens.

OUT is read through ``sinks.results.stored_documents``: every finished document (one with a
done marker) that has a Dolma record, in id order; a record without a done marker belongs to
a document that did not finish and is left out, a failed document has no record. The row's
``text``, ``metadata``, ``attributes`` and dates are the record's; its pages (text, route,
status, attributes) are the ``Document``'s, its figures the done marker's. Rows stream: one
document at a time is in memory, plus a shard's worth of rows.

``hf`` writes a folder ``datasets.load_from_disk`` opens through ``datasets``' own
``save_to_disk`` (that layout is ``datasets``' private format: only it writes it); without
``datasets`` installed it is refused before anything is written (``pip install 'ocrflow[hf]'``).
``save_to_disk`` writes ``state.json`` and ``dataset_info.json`` after the data, so a killed
export is not mistaken for a finished one.

Exporting again into the same folder replaces what the earlier export wrote, whatever the
format: a marker file (``.ocrflow-export.json``, hidden from dataset readers) says the folder
is export's; shards are numbered from 0 again and the earlier export's files the new one did
not rewrite are deleted, so every document is in the folder once. A folder holding files
export did not write is refused, unless ``overwrite``: then its data files (``*.parquet``,
``*.arrow``, ``dataset_info.json``, ``state.json``) are replaced too and other files kept.
"""

from __future__ import annotations

import itertools
import json
import posixpath
import re
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

import fsspec
import pyarrow as pa

from ocrflow.errors import ConfigError
from ocrflow.sinks.parquet import DOCUMENT_SCHEMA, figure_entry, page_figures, page_row, record_row
from ocrflow.sinks.results import StoredDocument, stored_documents
from ocrflow.storage.local import Store
from ocrflow.storage.open import open_store
from ocrflow.storage.shards import ShardLimits, ShardWriter

ExportFormat = Literal["parquet", "hf"]
#: Marks a folder as written by ``export`` (hidden: dataset readers skip dot files).
EXPORT_MARKER = ".ocrflow-export.json"
#: The names export writes: its own shards and the save_to_disk files.
_EXPORT_NAME = re.compile(
    r"^(part-\d+\.parquet|data-\d+-of-\d+\.arrow|dataset_info\.json|state\.json)$"
)
_DATA_NAME = re.compile(r"(\.parquet|\.arrow|^dataset_info\.json|^state\.json)$")
_BATCH_ROWS = 256


@dataclass(frozen=True, slots=True)
class ExportReport:
    """What an export wrote."""

    rows: int
    files: list[str]


def export(
    out_location: str,
    fmt: ExportFormat,
    dest: str,
    *,
    limits: ShardLimits | None = None,
    overwrite: bool = False,
) -> ExportReport:
    """Convert the OUT at ``out_location`` into ``fmt`` at ``dest`` (a folder or URL),
    replacing what an earlier export wrote there (see the module docstring)."""
    if fmt not in {"parquet", "hf"}:
        raise ConfigError(f"unknown export format {fmt!r}: use parquet or hf")
    if fmt == "hf":
        _require_datasets()
    documents = stored_documents(open_store(out_location))
    first = next(documents, None)
    if first is None:
        raise ConfigError(f"{out_location} holds no finished ocrflow documents")
    _check_folder(dest)
    target = open_store(dest)
    stale = _claim_folder(target, dest, fmt, overwrite=overwrite)
    rows = document_rows(itertools.chain([first], documents))
    report = _export_parquet(rows, target, limits) if fmt == "parquet" else _export_hf(rows, dest)
    written = {posixpath.basename(f) for f in report.files}
    for key in sorted(stale - written):
        target.delete(key)
    return report


def _check_folder(dest: str) -> None:
    """``ConfigError`` naming ``dest`` when it is a file (export writes a folder)."""
    fs, root = fsspec.core.url_to_fs(dest)
    try:
        is_file = fs.isfile(root)
    except OSError:
        is_file = False  # unreachable: the write reports it
    if is_file:
        raise ConfigError(f"{dest} is a file: export writes a folder, name a folder instead")


def _claim_folder(target: Store, dest: str, fmt: str, *, overwrite: bool) -> set[str]:
    """Mark ``dest`` as export's and return the files of an earlier export there (to delete
    once the new export is written); refuse files export did not write unless
    ``overwrite``. An earlier hf export's ``state.json`` goes at once: until the new one is
    written whole, the folder must not look like a finished dataset."""
    files = [k for k in target.list("") if not any(p.startswith(".") for p in k.split("/"))]
    ours = target.exists(EXPORT_MARKER)
    owned = {k for k in files if ours and _EXPORT_NAME.match(k)}
    foreign = [k for k in files if k not in owned]
    if foreign and not overwrite:
        more = f" and {len(foreign) - 3} more" if len(foreign) > 3 else ""
        raise ConfigError(
            f"{dest} holds files ocrflow export did not write ({', '.join(foreign[:3])}{more}); "
            "name an empty or new folder, or pass --overwrite to replace its data files"
        )
    stale = owned | {k for k in foreign if "/" not in k and _DATA_NAME.search(k)}
    marker = {"format": fmt, "exported": time.time()}
    target.write_bytes(EXPORT_MARKER, json.dumps(marker).encode())
    if "state.json" in stale:
        target.delete("state.json")
    return stale


def document_rows(documents: Iterable[StoredDocument]) -> Iterator[dict[str, Any]]:
    """Parquet rows (``DOCUMENT_SCHEMA``) of the documents that have a JSONL record."""
    for stored in documents:
        row = export_row(stored)
        if row is not None:
            yield row


def export_row(stored: StoredDocument) -> dict[str, Any] | None:
    """The row ``ParquetSink`` wrote for a document, rebuilt from what OUT holds of it;
    ``None`` for a document without a JSONL record (failed: no text)."""
    record, document = stored.record, stored.document
    if record is None:
        return None
    figures_of = {summary.page: summary.figures for summary in stored.marker.pages}
    pages, figures = [], []
    for page in document.pages:
        route, status = str(page.route), str(page.status)
        pages.append(
            page_row(page.number, page.markdown, route, status, page.attributes, page.confidence)
        )
        recorded = figures_of.get(page.number, ())  # in newer done markers
        figures.extend(
            [figure_entry(document.id, f.page, f.index, f.label, f.box) for f in recorded]
            if recorded
            else page_figures(page.number, page.markdown, page.attributes)
        )
    source = record.metadata.get("Source-File") or document.source
    status = record.metadata.get("status") or str(document.status)
    return record_row(record.to_dict(), pages, figures, source=source, status=status)


def _export_parquet(
    rows: Iterator[dict[str, Any]], dest: Store, limits: ShardLimits | None
) -> ExportReport:
    writer = ShardWriter(dest, "part", DOCUMENT_SCHEMA, limits, prefix="", first_number=0)
    count = 0
    for row in rows:
        writer.add(row, row["id"], len(row["text"]) * 2 + 256)
        count += 1
    writer.flush()
    return ExportReport(count, list(writer.written))


# -- Hugging Face save_to_disk -----------------------------------------------------------
HF_HINT = "--format hf needs the datasets package: pip install 'ocrflow[hf]' (or use parquet)"


def _require_datasets() -> None:
    """``ConfigError`` with the install line when ``datasets`` is missing (checked before
    anything is written)."""
    try:
        import datasets  # noqa: F401
    except ImportError:
        raise ConfigError(HF_HINT) from None


def _export_hf(rows: Iterator[dict[str, Any]], dest: str) -> ExportReport:
    """``datasets``' own ``save_to_disk`` over the rows, streamed first into one Arrow file
    (a temporary folder; beside ``dest`` when it is local) so that one batch of rows is in
    memory at a time, never the whole export."""
    import datasets

    fs, root = fsspec.core.url_to_fs(dest)
    local = "file" in (fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,))
    if local:
        fs.makedirs(root, exist_ok=True)
    # A hidden folder inside a local ``dest`` (same disk; dataset readers skip dot files):
    # save_to_disk only refuses to write into the folder its source file is in.
    with tempfile.TemporaryDirectory(prefix=".ocrflow-export-", dir=root if local else None) as tmp:
        staged = posixpath.join(tmp, "rows.arrow")
        count = 0
        with pa.OSFile(staged, "wb") as handle, pa.ipc.new_stream(handle, DOCUMENT_SCHEMA) as out:
            for batch in _batched(rows, _BATCH_ROWS):
                out.write_batch(pa.RecordBatch.from_pylist(batch, schema=DOCUMENT_SCHEMA))
                count += len(batch)
        features = datasets.Features.from_arrow_schema(DOCUMENT_SCHEMA)
        info = datasets.DatasetInfo(description="ocrflow documents", features=features)
        dataset = datasets.Dataset.from_file(staged, info=info)
        bars_were_on = datasets.is_progress_bar_enabled()
        datasets.disable_progress_bars()  # a bar per export on stderr; the CLI prints one line
        try:
            dataset.save_to_disk(dest, storage_options=fs.storage_options)
        finally:
            if bars_were_on:
                datasets.enable_progress_bars()
        del dataset  # its memory map of the staged file, before the folder goes
    with fs.open(posixpath.join(root, "state.json")) as handle:
        data_files = [f["filename"] for f in json.load(handle)["_data_files"]]
    names = [*data_files, "dataset_info.json", "state.json"]
    return ExportReport(count, [posixpath.join(root, n) for n in names])


def _batched(rows: Iterator[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    batch: list[dict[str, Any]] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch
