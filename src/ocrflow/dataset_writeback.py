"""At the end of a run on dataset inputs: the input rows again, with ``markdown`` and
``ocr_status`` added (``--format`` with ``parquet``).

One output row per input row, in input order, in shards ``OUT/dataset/<name>-<n>.parquet``
(``<name>``: the input's file or folder name and a short hash of its location). Rows stream
from the input one batch at a time; each row's result is looked up by its work item (the
manifest names it by the row's URI). Writing back again replaces the shards: a rerun never
adds rows. Rows not converted yet (another worker still at work) get ``ocr_status`` pending.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from collections.abc import Iterator

from ocrflow.config import RunConfig
from ocrflow.dataset_source import (
    DatasetRow,
    _absolute,
    dataset_files,
    dataset_schema,
    is_dataset_input,
    iter_dataset_rows,
    write_back,
)
from ocrflow.records import WorkItem
from ocrflow.sinks.jsonl import results_key
from ocrflow.sinks.markdown import markdown_key
from ocrflow.sinks.parquet import read_documents
from ocrflow.sources import RowRef, row_uri
from ocrflow.workitems import Manifest
from ocrflow.workspace import Workspace

PENDING = "pending"


def dataset_inputs(config: RunConfig) -> list[str]:
    """The run's inputs that are datasets, made absolute as planning made them."""
    return [_absolute(i) for i in config.inputs if not i.startswith("@") and is_dataset_input(i)]


def write_back_name(location: str) -> str:
    """The shard name of an input's write-back: its base name and a hash of its location."""
    base = posixpath.basename(location.rstrip("/")).split("*")[0].removesuffix(".parquet")
    digest = hashlib.sha256(location.encode()).hexdigest()[:8]
    return f"{base or 'dataset'}-{digest}"


def write_back_datasets(config: RunConfig, workspace: Workspace) -> list[str]:
    """Write every dataset input back with its results, when ``parquet`` is an output
    format; returns the shard keys written (``[]`` otherwise)."""
    if "parquet" not in config.out.formats:
        return []
    locations = dataset_inputs(config)
    if not locations:
        return []
    items = {item.uri: item for item in Manifest(workspace.store).items()}
    texts = TextLookup(config, workspace)
    written: list[str] = []
    for location in locations:
        rows = iter_dataset_rows(
            location,
            column=config.input.dataset_column,
            id_column=config.input.dataset_id_column,
        )
        results = _results(location, rows, items, texts)
        schema = dataset_schema(dataset_files(location))
        written += write_back(
            results, workspace.store, schema=schema, worker=write_back_name(location)
        )
    return written


def _results(
    location: str,
    rows: Iterator[DatasetRow],
    items: dict[str, WorkItem],
    texts: TextLookup,
) -> Iterator[tuple[DatasetRow, str | None, str]]:
    for row in rows:
        item = items.get(row_uri(RowRef(location, row.shard, row.index, row.row_id)))
        markdown, status = texts.result(item) if item is not None else (None, PENDING)
        yield row, markdown, status


class TextLookup:
    """A finished row's Markdown and status, from the outputs this run writes: the Markdown
    file (format ``markdown``), else the JSONL record (``jsonl``), else the run's Parquet
    shards (read once into an id → text map: with ``--format parquet`` alone, write-back
    holds every text of the run in memory)."""

    def __init__(self, config: RunConfig, workspace: Workspace) -> None:
        self.formats = config.out.formats
        self.workspace = workspace
        self.manifest = Manifest(workspace.store)
        self._parquet: dict[str, str] | None = None

    def result(self, item: WorkItem) -> tuple[str | None, str]:
        """``(markdown or None, status)``; status ``pending`` when not finished yet."""
        done = self.manifest.item_done(item.item_id)
        record = self.workspace.done_record(done.doc_id) if done is not None else None
        if record is None:
            return None, PENDING
        return self._text(record.doc_id, item.rel), str(record.status)

    def _text(self, doc_id: str, rel: str) -> str | None:
        store = self.workspace.store
        if "markdown" in self.formats:
            blob = store.read_bytes(markdown_key(rel))
            return blob.decode() if blob is not None else None
        if "jsonl" in self.formats:
            blob = store.read_bytes(results_key(doc_id))
            return json.loads(blob)["text"] if blob is not None else None
        if self._parquet is None:
            table = read_documents(store)
            ids, texts = table["id"].to_pylist(), table["text"].to_pylist()
            self._parquet = dict(zip(ids, texts, strict=True))
        return self._parquet.get(doc_id)
