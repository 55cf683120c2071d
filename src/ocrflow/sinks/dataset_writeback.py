"""At the end of a run on dataset inputs: the input rows again, with ``markdown`` and
``ocr_status`` added (``--format`` with ``parquet``).

One output row per input row, in input order, in shards ``OUT/dataset/<name>-<n>.parquet``
(``<name>``: the input's file or folder name and a short hash of its location). Rows stream
from the input one batch at a time; each row's result is looked up by its work item (the
manifest names it by the row's URI) and read through ``sinks.results``. Writing back again
replaces the shards: a rerun never adds rows. Rows not converted yet (another worker still
at work) get ``ocr_status`` pending.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from collections.abc import Iterable, Iterator

import pyarrow as pa

from ocrflow.config import RunConfig
from ocrflow.inputs.dataset import (
    HF_METADATA_KEY,
    DatasetRow,
    _absolute,
    dataset_files,
    dataset_schema,
    iter_dataset_rows,
)
from ocrflow.inputs.dataset_files import is_dataset_input
from ocrflow.inputs.source import RowRef, row_uri
from ocrflow.sinks.results import OutputTexts, done_marker
from ocrflow.storage.local import Store
from ocrflow.storage.shards import (
    ShardLimits,
    ShardWriter,
    worker_shards,
)
from ocrflow.workspace.records import WorkItem
from ocrflow.workspace.state import Workspace
from ocrflow.workspace.workitems import Manifest

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
    """A finished row's Markdown and status, read through ``sinks.results``: its done
    marker, and its text from the outputs this run writes (``OutputTexts``: the Markdown
    file, else the JSONL record, else the run's Parquet shards)."""

    def __init__(self, config: RunConfig, workspace: Workspace) -> None:
        self.store = workspace.store
        self.manifest = Manifest(workspace.store)
        self.texts = OutputTexts(workspace.store, config.out.formats)

    def result(self, item: WorkItem) -> tuple[str | None, str]:
        """``(markdown or None, status)``; status ``pending`` when not finished yet."""
        done = self.manifest.item_done(item.item_id)
        record = done_marker(self.store, done.doc_id) if done is not None else None
        if record is None:
            return None, PENDING
        return self.texts.text(record.doc_id, item.rel), str(record.status)


WRITE_BACK_DIR = "dataset"


ADDED_FIELDS = (pa.field("markdown", pa.string()), pa.field("ocr_status", pa.string()))


# -- writing back ------------------------------------------------------------------------
def write_back_schema(schema: pa.Schema) -> pa.Schema:
    """The input schema plus ``markdown`` and ``ocr_status``; Hugging Face feature metadata
    gains the two columns so that ``datasets`` still decodes the input's features."""
    out = schema
    for added in ADDED_FIELDS:
        if added.name not in out.names:
            out = out.append(added)
    metadata = dict(schema.metadata or {})
    if HF_METADATA_KEY in metadata:
        info = json.loads(metadata[HF_METADATA_KEY])
        features = info.get("info", {}).get("features")
        if isinstance(features, dict):
            for added in ADDED_FIELDS:
                features[added.name] = {"dtype": "string", "_type": "Value"}
            metadata[HF_METADATA_KEY] = json.dumps(info).encode()
    return out.with_metadata(metadata)


def write_back(
    rows: Iterable[tuple[DatasetRow, str | None, str]],
    out_store: Store,
    *,
    schema: pa.Schema,
    worker: str = "dataset",
    limits: ShardLimits | None = None,
    prefix: str = WRITE_BACK_DIR,
) -> list[str]:
    """Write ``(row, markdown, ocr_status)`` as the input's columns plus ``markdown`` and
    ``ocr_status``, in shards ``<prefix>/<worker>-<n>.parquet`` (default ``dataset/``: apart
    from the run's own ``parquet/`` shards, whose schema differs); returns the keys written.

    Shards are numbered from 0 and the worker's shards of an earlier write-back beyond them
    are deleted: writing back again replaces the set, it never adds rows twice.
    """
    target = write_back_schema(schema)
    writer = ShardWriter(out_store, worker, target, limits, prefix=prefix, first_number=0)
    for row, markdown, status in rows:
        record = {**row.columns, "markdown": markdown, "ocr_status": status}
        writer.add(record, row.doc_id, len(row.data) + len(markdown or "") + 256)
    writer.flush()
    stale = set(worker_shards(out_store, writer.worker, prefix)) - set(writer.written)
    for key in sorted(stale):
        out_store.delete(key)
    return writer.written
