"""Figures as workspace records: what extract leaves for describe and assemble.

The three stages talk only through the workspace:

- ``.ocrflow/figures/<doc id>.json`` (a ``FigureDocument``): written by extract (the figure
  sink) for each finished document that has figures, before its done marker. It holds every
  figure once (page, index, label, box, crop path) and the document's pages with their
  figure placeholders, so assemble can write the document again without the model.
- ``.ocrflow/describe/<set>/<doc id>/p<page>-<n>.json`` (a ``FigureResult``): one per
  described figure, written by describe as soon as its answer arrives; its existence is
  what makes a rerun skip the figure. ``<set>`` is the fingerprint of the describe settings
  (task, prompt, model), so another task or model starts a result set of its own.
- ``.ocrflow/describe/latest.json`` (a ``DescribeSet``): the settings of the last describe
  run; assemble uses its results.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from pydantic import Field

from ocrflow.records import DocumentOutcome, StoredRecord
from ocrflow.sinks.base import DocumentMeta, FinishedDocument, figure_key
from ocrflow.storage import Store
from ocrflow.types import DocumentResult, PageResult
from ocrflow.workspace import WORKSPACE_DIR, page_from_dict, page_to_dict

FIGURE_DOCS_DIR = f"{WORKSPACE_DIR}/figures"
DESCRIBE_DIR = f"{WORKSPACE_DIR}/describe"
LATEST_KEY = f"{DESCRIBE_DIR}/latest.json"

FigureKey = tuple[int, int]


class FigureEntry(StoredRecord):
    """One figure of a document: where it is on its page and where its crop lies in OUT."""

    page: int
    index: int
    label: str = "image"
    box: tuple[float, ...] = ()
    path: str = ""

    @property
    def key(self) -> FigureKey:
        return (self.page, self.index)


class FigureDocument(DocumentOutcome):
    """A finished document with figures, as extract left it (page texts hold placeholders)."""

    meta: dict[str, Any] = Field(default_factory=dict)
    pages: tuple[dict[str, Any], ...] = ()
    figures: tuple[FigureEntry, ...] = ()


class FigureResult(StoredRecord):
    """What describe got for one figure. ``markdown`` is what assemble places after the
    figure's link (a table for a tabular ``parse`` answer); ``text`` is the raw answer."""

    doc_id: str
    page: int
    index: int
    status: str = "ok"  # "ok" or "failed" (a rerun tries failed figures again)
    task: str = "caption"
    text: str = ""
    markdown: str = ""
    error: str | None = None
    attempts: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    latency_s: float = 0.0


class DescribeSet(StoredRecord):
    """The settings of a describe run; their fingerprint names its result set."""

    task: str
    prompt: str
    model: str

    @property
    def fingerprint(self) -> str:
        blob = json.dumps(self.model_dump(), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:12]


# -- extract: the document record -------------------------------------------------------------
def figure_document(document: FinishedDocument) -> FigureDocument:
    """The record of a finished document (its figures' crops are files of their own)."""
    result, meta = document.result, document.meta
    pages = sorted(result.pages, key=lambda p: p.page)
    return FigureDocument(
        **FigureDocument.fields_of(result),
        meta={
            "rel": meta.rel,
            "content_sha256": meta.content_sha256,
            "created": meta.created,
            "engine": meta.engine,
            "fingerprint": meta.fingerprint,
        },
        pages=tuple(page_to_dict(p) for p in pages),
        figures=tuple(
            FigureEntry(
                page=f.page,
                index=f.index,
                label=f.label,
                box=f.box,
                path=figure_key(result.doc_id, f.page, f.index),
            )
            for p in pages
            for f in p.figures
        ),
    )


def figure_document_key(doc_id: str) -> str:
    return f"{FIGURE_DOCS_DIR}/{doc_id}.json"


def save_figure_document(store: Store, document: FinishedDocument) -> None:
    """Record a document's figures and pages; documents without figures record nothing."""
    if any(page.figures for page in document.result.pages):
        store.write_bytes(figure_document_key(document.doc_id), figure_document(document).dump())


def load_figure_document(store: Store, doc_id: str) -> FigureDocument | None:
    blob = store.read_bytes(figure_document_key(doc_id))
    return FigureDocument.load(blob) if blob else None


def figure_doc_ids(store: Store) -> list[str]:
    """Ids of the documents with a figure record (one listing)."""
    keys = store.list(FIGURE_DOCS_DIR)
    return [k.rsplit("/", 1)[-1].removesuffix(".json") for k in keys if k.endswith(".json")]


def finished_document(
    record: FigureDocument, descriptions: Mapping[FigureKey, str] | None = None
) -> FinishedDocument:
    """The document as the sinks take it, each figure with its description (if any)."""
    pages = tuple(_described(page_from_dict(p), descriptions or {}) for p in record.pages)
    result = DocumentResult(
        record.doc_id,
        record.source,
        record.status,
        pages=pages,
        page_count=record.page_count,
        reason=record.reason,
        message=record.message,
    )
    meta = record.meta
    return FinishedDocument(
        result,
        DocumentMeta(
            rel=str(meta.get("rel", "")),
            content_sha256=str(meta.get("content_sha256", "")),
            created=meta.get("created"),
            engine=str(meta.get("engine", "")),
            fingerprint=str(meta.get("fingerprint", "")),
            source_name=meta.get("source_name"),
        ),
    )


def _described(page: PageResult, descriptions: Mapping[FigureKey, str]) -> PageResult:
    if not page.figures:
        return page
    figures = tuple(
        replace(f, description=descriptions.get((f.page, f.index))) for f in page.figures
    )
    return replace(page, figures=figures)


# -- describe: results ---------------------------------------------------------------------
def result_prefix(set_id: str, doc_id: str = "") -> str:
    return f"{DESCRIBE_DIR}/{set_id}/{doc_id}" if doc_id else f"{DESCRIBE_DIR}/{set_id}"


def result_key(set_id: str, doc_id: str, page: int, index: int) -> str:
    return f"{result_prefix(set_id, doc_id)}/p{page}-{index}.json"


def save_result(store: Store, set_id: str, result: FigureResult) -> None:
    store.write_bytes(result_key(set_id, result.doc_id, result.page, result.index), result.dump())


def described_keys(store: Store, set_id: str, doc_id: str) -> set[FigureKey]:
    """Figures of a document with a successful result in the set."""
    return {k for k, r in load_results(store, set_id, doc_id).items() if r.status == "ok"}


def load_results(store: Store, set_id: str, doc_id: str) -> dict[FigureKey, FigureResult]:
    """Every result of a document in the set, by (page, index)."""
    results: dict[FigureKey, FigureResult] = {}
    for key in store.list(result_prefix(set_id, doc_id)):
        blob = store.read_bytes(key)
        if blob:
            result = FigureResult.load(blob)
            results[(result.page, result.index)] = result
    return results


def save_latest(store: Store, settings: DescribeSet) -> None:
    store.write_bytes(LATEST_KEY, settings.dump())


def load_latest(store: Store) -> DescribeSet | None:
    blob = store.read_bytes(LATEST_KEY)
    return DescribeSet.load(blob) if blob else None
