"""Parquet output: one row a document, in shards of bounded size per worker.

Shards are ``parquet/<worker>-<n>.parquet`` (``n`` zero-padded, continuing after the worker's
shards of earlier runs); each is written whole through ``Store.write_bytes``, so it is atomic
(temp file + rename locally, one PUT on an object store). The row holds the same ``id`` and
``text`` as the document's Dolma JSONL record (both come from ``sinks.jsonl.dolma_record``).

Exactly once after a kill — the design:

1. **Commit with the shard.** The sink buffers rows and calls ``on_commit(doc_ids)`` only
   after the shard holding them is written. The pipeline writes a document's done marker from
   that callback, not right after ``write()``: a done marker therefore never exists for a row
   that is not on disk. A kill loses at most the buffered rows, whose documents have no done
   marker and are redone by the resume. Documents the sink holds no row for (failed, no
   pages) are committed at once.
2. **Rows carry ids; finalize makes the set exact.** A kill between a shard's write and its
   done markers leaves rows of documents without a marker; the resume writes them again, in
   a newer shard. ``finalize_shards(store, done_ids)`` (called once at the end of a run, when
   no worker writes) keeps one row per id — the newest ``added``, ties to the later shard
   name — and drops rows whose id has no done marker. It rewrites only the shards that lose
   rows, each atomically, and deletes shards left empty. It only ever removes losing rows,
   so a finalize killed halfway leaves every winner in place and running it again converges.
   ``retry`` (done marker cleared, document redone) is the same case: the newer row wins.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ocrflow.document import page_confidence
from ocrflow.sinks.base import DocumentMeta, FinishedDocument, figure_key, page_text
from ocrflow.sinks.jsonl import dolma_record
from ocrflow.storage.local import Store
from ocrflow.storage.shards import (
    ShardLimits,
    ShardWriter,
    release_arrow_memory_promptly,
    shard_keys,
    table_bytes,
)
from ocrflow.types import DocumentResult, PageResult

PAGE_TYPE = pa.struct(
    [
        ("page", pa.int32()),
        ("text", pa.string()),
        ("route", pa.string()),
        ("status", pa.string()),
        ("attributes", pa.string()),  # JSON: page attributes differ by engine
        # 0..1 or null (``document.confidence``). Last, so readers of the older struct
        # (by name) keep working; shards written before it lack it (read as null).
        ("confidence", pa.float64()),
    ]
)


FIGURE_TYPE = pa.struct(
    [
        ("page", pa.int32()),
        ("path", pa.string()),
        ("box", pa.list_(pa.float64())),  # (x0, y0, x1, y1) in 0..1 of the page; [] if unknown
        ("label", pa.string()),
        ("description", pa.string()),  # the describe stage's result; null before it
    ]
)


DOCUMENT_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("source", pa.string()),
        ("text", pa.string()),
        ("status", pa.string()),
        ("pages", pa.list_(PAGE_TYPE)),
        ("figures", pa.list_(FIGURE_TYPE)),
        ("metadata", pa.string()),  # JSON, the Dolma record's metadata
        ("attributes", pa.string()),  # JSON, the Dolma attributes (page spans, page_blocks)
        ("added", pa.string()),
        ("created", pa.string()),
    ]
)


_FIGURE_LINK = re.compile(r"!\[([^\]]*)\]\((figures/[^)\s]+)\)")


Commit = Callable[[list[str]], None]


# -- rows --------------------------------------------------------------------------------
def page_row(
    page: int,
    text: str,
    route: str,
    status: str,
    attributes: dict[str, Any],
    confidence: float | None = None,
) -> dict[str, Any]:
    """One ``pages`` entry; ``text`` as the JSONL record holds it (stripped)."""
    return {
        "page": page,
        "text": text,
        "route": route,
        "status": status,
        "attributes": json.dumps(attributes, ensure_ascii=False, sort_keys=True, default=str),
        "confidence": confidence,
    }


def page_figures(page: int, text: str, attributes: dict[str, Any]) -> list[dict[str, Any]]:
    """A page's figures as ``export`` finds them in a record: entries in
    ``attributes["figures"]`` (path, box, label), else the figure links in its text (box
    unknown: ``[]``). The sink itself uses the pages' typed figures."""
    recorded = attributes.get("figures")
    if isinstance(recorded, list) and all(isinstance(f, dict) for f in recorded):
        return [
            {
                "page": page,
                "path": str(f.get("path", "")),
                "box": [float(v) for v in f.get("box") or ()],
                "label": str(f.get("label", "image")),
                "description": f.get("description"),
            }
            for f in recorded
        ]
    return [
        {
            "page": page,
            "path": m.group(2),
            "box": [],
            "label": m.group(1) or "image",
            "description": None,
        }
        for m in _FIGURE_LINK.finditer(text)
    ]


def figure_entry(
    doc_id: str,
    page: int,
    index: int,
    label: str,
    box: Iterable[float],
    description: str | None = None,
) -> dict[str, Any]:
    """One ``figures`` entry: where the crop is (``figure_key``), its box, label and
    description (``None`` until the describe stage gave one)."""
    return {
        "page": page,
        "path": figure_key(doc_id, page, index),
        "box": [float(v) for v in box],
        "label": label,
        "description": description,
    }


def document_row(result: DocumentResult, meta: DocumentMeta) -> dict[str, Any]:
    """The Parquet row of a document, built from the same Dolma record as its JSONL line."""
    record = dolma_record(result, meta)
    pages: list[dict[str, Any]] = []
    figures: list[dict[str, Any]] = []
    for page in sorted(result.pages, key=lambda p: p.page):
        pages.append(_page_entry(result.doc_id, page))
        figures.extend(
            figure_entry(result.doc_id, f.page, f.index, f.label, f.box, f.description)
            for f in page.figures
        )
    return record_row(record, pages, figures, source=meta.source_name or result.source,
                      status=str(result.status))  # fmt: skip


def record_row(
    record: dict[str, Any],
    pages: list[dict[str, Any]],
    figures: list[dict[str, Any]],
    *,
    source: str,
    status: str,
) -> dict[str, Any]:
    """A row from a Dolma record plus its pages and figures (the sink and export share it)."""
    return {
        "id": record["id"],
        "source": source,
        "text": record["text"],
        "status": status,
        "pages": pages,
        "figures": figures,
        "metadata": json.dumps(record.get("metadata", {}), ensure_ascii=False, sort_keys=True),
        "attributes": json.dumps(record.get("attributes", {}), ensure_ascii=False),
        "added": record.get("added"),
        "created": record.get("created"),
    }


def _page_entry(doc_id: str, page: PageResult) -> dict[str, Any]:
    text, route, status = page_text(doc_id, page), str(page.route), str(page.status)
    return page_row(page.page, text, route, status, page.attributes, page_confidence(page))


class ParquetSink:
    """Writes each finished document as a Parquet row; see the module docstring for the
    commit protocol (``on_commit`` receives the ids whose rows are on disk)."""

    def __init__(
        self,
        store: Store,
        worker: str,
        *,
        limits: ShardLimits | None = None,
        on_commit: Commit | None = None,
    ) -> None:
        release_arrow_memory_promptly()
        self.shards = ShardWriter(store, worker, DOCUMENT_SCHEMA, limits)
        self.on_commit = on_commit

    def write(self, document: FinishedDocument) -> None:
        """Buffer the document's row (ok or partial with pages); a full buffer is written."""
        if not document.has_output:
            self._commit([document.doc_id])  # no row: nothing to wait for
            return
        row = document_row(document.result, document.meta)
        size = len(row["text"]) * 2 + sum(len(p["attributes"]) for p in row["pages"]) + 256
        self._commit(self.shards.add(row, document.doc_id, size))

    def flush(self) -> None:
        """Write buffered rows now (e.g. before a worker gives up its lease)."""
        self._commit(self.shards.flush())

    def close(self) -> None:
        """Write the last, partly filled shard."""
        self.flush()

    def _commit(self, ids: list[str]) -> None:
        if ids and self.on_commit is not None:
            self.on_commit(ids)


# -- reading and finalizing --------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class FinalizeReport:
    """What ``finalize_shards`` changed."""

    shards: int
    rewritten: list[str]
    deleted: list[str]
    rows_dropped: int
    rows_kept: int


def _read_shard(store: Store, key: str, columns: list[str] | None = None) -> pa.Table:
    blob = store.read_bytes(key)
    if blob is None:
        return DOCUMENT_SCHEMA.empty_table()
    table = pq.read_table(io.BytesIO(blob), columns=columns)
    if columns is None and table.schema != DOCUMENT_SCHEMA:
        table = _upgraded(table)
    return table


def _upgraded(table: pa.Table) -> pa.Table:
    """A shard of an older schema (pages without ``confidence``) in ``DOCUMENT_SCHEMA``, its
    missing fields null, so old and new shards concatenate and finalize together."""
    try:
        return pa.Table.from_pylist(table.to_pylist(), schema=DOCUMENT_SCHEMA)
    except (pa.ArrowInvalid, pa.ArrowTypeError, KeyError):
        return table  # not ours to fix: the reader sees it as written


def _winners(store: Store, keys: list[str]) -> dict[str, tuple[str, int, int]]:
    """For each id, where its newest row lives: ``(added, shard position, row)`` ordering."""
    best: dict[str, tuple[str, int, int]] = {}
    for position, key in enumerate(keys):
        table = _read_shard(store, key, ["id", "added"])
        for row, (doc_id, added) in enumerate(
            zip(table["id"].to_pylist(), table["added"].to_pylist(), strict=True)
        ):
            rank = (added or "", position, row)
            if doc_id not in best or rank > best[doc_id]:
                best[doc_id] = rank
    return best


def _keep_mask(
    table: pa.Table, position: int, best: dict[str, tuple[str, int, int]], done: set[str] | None
) -> list[bool]:
    """Which rows of the shard at ``position`` survive: the id's winner, and done."""
    return [
        best[doc_id][1:] == (position, row) and (done is None or doc_id in done)
        for row, doc_id in enumerate(table["id"].to_pylist())
    ]


def finalize_shards(store: Store, done_ids: Iterable[str] | None = None) -> FinalizeReport:
    """Make the shards hold each id once (the newest row), and only ids in ``done_ids``.

    Call when no worker is writing (the end of a run). Reads one shard at a time.
    """
    keys = shard_keys(store)
    done = set(done_ids) if done_ids is not None else None
    best = _winners(store, keys)
    rewritten, deleted, dropped, kept = [], [], 0, 0
    for position, key in enumerate(keys):
        table = _read_shard(store, key)
        mask = _keep_mask(table, position, best, done)
        kept += sum(mask)
        if all(mask):
            continue
        dropped += len(mask) - sum(mask)
        if any(mask):
            store.write_bytes(key, table_bytes(table.filter(pa.array(mask))))
            rewritten.append(key)
        else:
            store.delete(key)
            deleted.append(key)
    return FinalizeReport(len(keys), rewritten, deleted, dropped, kept)


def read_documents(store: Store, done_ids: Iterable[str] | None = None) -> pa.Table:
    """Every document row, one per id (newest wins), optionally only ids in ``done_ids``.

    Loads all shards into one table: for tests and small OUTs; big ones call
    ``finalize_shards`` and read the files with any Parquet reader.
    """
    keys = shard_keys(store)
    best = _winners(store, keys)
    done = set(done_ids) if done_ids is not None else None
    parts = []
    for position, key in enumerate(keys):
        table = _read_shard(store, key)
        mask = _keep_mask(table, position, best, done)
        parts.append(table.filter(pa.array(mask, type=pa.bool_())))
    return pa.concat_tables(parts) if parts else DOCUMENT_SCHEMA.empty_table()


def rewrite_parquet(
    store: Store, doc_ids: set[str], load: Callable[[str], FinishedDocument | None]
) -> tuple[int, int]:
    """Rebuild the rows of ``doc_ids`` in every shard that holds one; return (shards
    rewritten, rows rebuilt). A row keeps its place; each shard is replaced atomically."""
    shards = rows_rebuilt = 0
    for key in shard_keys(store):
        blob = store.read_bytes(key)
        if blob is None:
            continue
        table = pq.read_table(io.BytesIO(blob))
        ids = table["id"].to_pylist()
        if not doc_ids.intersection(ids):
            continue
        rows = table.to_pylist()
        for position, doc_id in enumerate(ids):
            document = load(doc_id) if doc_id in doc_ids else None
            if document is not None:
                rows[position] = document_row(document.result, document.meta)
                rows_rebuilt += 1
        rebuilt = pa.Table.from_pylist(rows, schema=DOCUMENT_SCHEMA)
        store.write_bytes(key, table_bytes(rebuilt))
        shards += 1
    return shards, rows_rebuilt
