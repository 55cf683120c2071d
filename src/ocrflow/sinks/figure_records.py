"""The figure record a document leaves for the later stages (describe, assemble).

``.ocrflow/figures/<doc id>.json`` (a ``FigureDocument``) is written by the figure sink for
each finished document that has figures, before its done marker. It holds every figure once
(page, index, label, box, crop path) and the document's pages with their figure
placeholders, so the assemble stage can write the document again without the model. What
the stages add to it lives in ``stages/figure_items.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from pydantic import Field

from ocrflow.sinks.base import DocumentMeta, FinishedDocument, figure_key
from ocrflow.storage.local import Store
from ocrflow.types import DocumentResult, PageResult
from ocrflow.workspace.records import DocumentOutcome, StoredRecord
from ocrflow.workspace.state import WORKSPACE_DIR, page_from_dict, page_to_dict

#: A figure's place in its document: (page number, index on the page).
FigureKey = tuple[int, int]

FIGURE_DOCS_DIR = f"{WORKSPACE_DIR}/figures"


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
