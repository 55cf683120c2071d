"""One Dolma-style JSONL record a document: ``results/<doc id>.jsonl``."""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from typing import Any

from ocrflow.document import blocks_to_rows, linked_blocks, page_confidence
from ocrflow.inputs.source import row_metadata
from ocrflow.sinks.base import (
    DocumentMeta,
    FinishedDocument,
    figure_key,
    figure_markdown,
    page_text,
)
from ocrflow.sinks.markdown import PAGE_JOINER
from ocrflow.storage.local import Store
from ocrflow.types import DocumentResult, PageResult


def results_key(doc_id: str) -> str:
    """Where a document's JSONL record goes."""
    return f"results/{doc_id}.jsonl"


def assemble_text(pages: tuple[PageResult, ...], doc_id: str = "") -> tuple[str, list[list[int]]]:
    """Join page texts and return ``[start, end, page]`` spans that index into the result.

    Figure placeholders become links relative to OUT (``figures/<doc id>/…``).
    """
    chunks: list[str] = []
    spans: list[list[int]] = []
    cursor = 0
    for page in sorted(pages, key=lambda p: p.page):
        if chunks:
            chunks.append(PAGE_JOINER)
            cursor += len(PAGE_JOINER)
        text = page_text(doc_id, page)
        chunks.append(text)
        spans.append([cursor, cursor + len(text), page.page])
        cursor += len(text)
    return "".join(chunks), spans


def dolma_record(result: DocumentResult, meta: DocumentMeta) -> dict[str, Any]:
    """One Dolma-style record (``id``, ``text``, ``source``, ``added``, ``created``, …)."""
    text, spans = assemble_text(result.pages, result.doc_id)
    pages = sorted(result.pages, key=lambda p: p.page)
    return {
        "id": result.doc_id,
        "text": text,
        "source": "ocrflow",
        "added": _iso(None),
        "created": _iso(meta.created),
        "metadata": {
            "Source-File": meta.source_name or result.source,
            "source_path": meta.rel,
            "content_sha256": meta.content_sha256,
            "pdf-total-pages": result.page_count,
            "pages_converted": len(pages),
            "engine": meta.engine,
            "routes": dict(Counter(str(p.route) for p in pages)),
            "status": str(result.status),
            "config_fingerprint": meta.fingerprint,
            **row_metadata(result.source),  # dataset inputs: the row's id and place
        },
        "attributes": {
            "pdf_page_numbers": spans,
            "page_routes": _page_attr(pages, spans, lambda p: str(p.route)),
            "page_status": _page_attr(pages, spans, lambda p: str(p.status)),
            "page_rotation": _page_attr(pages, spans, lambda p: p.attributes.get("rotation", 0)),
            # 0..1 or null (``document.confidence``): what a reviewer reads first.
            "page_confidence": _page_attr(pages, spans, page_confidence),
            **_figures_attr(result.doc_id, pages),
            **_blocks_attr(result.doc_id, pages, spans),
        },
    }


def _blocks_attr(doc_id: str, pages: list[PageResult], spans: list[list[int]]) -> dict[str, Any]:
    """``page_blocks``: each page's blocks in the compact form of ``document.rows`` (labels,
    boxes, texts, confidences, lines), figure links as in ``text``; only for documents
    with blocks, so records without keep their shape."""
    if not any(page.blocks for page in pages):
        return {}

    def rows(page: PageResult) -> list[Any]:
        return blocks_to_rows(linked_blocks(page, lambda f: figure_markdown(doc_id, f)))

    return {"page_blocks": _page_attr(pages, spans, rows)}


def _figures_attr(doc_id: str, pages: list[PageResult]) -> dict[str, Any]:
    """``figures``: each figure's page, file, box, label and description (only for
    documents that have figures, so records without keep their shape)."""
    figures = [
        {
            "page": f.page,
            "index": f.index,
            "path": figure_key(doc_id, f.page, f.index),
            "box": list(f.box),
            "label": f.label,
            "description": f.description,
        }
        for page in pages
        for f in page.figures
    ]
    return {"figures": figures} if figures else {}


def _page_attr(pages: list[PageResult], spans: list[list[int]], value: Any) -> list[list[Any]]:
    return [[s[0], s[1], value(p)] for p, s in zip(pages, spans, strict=True)]


def _iso(timestamp: float | None) -> str:
    moment = dt.datetime.fromtimestamp(timestamp, dt.UTC) if timestamp else dt.datetime.now(dt.UTC)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


_LINE_BREAKERS = str.maketrans({"\u2028": "\\u2028", "\u2029": "\\u2029", "\x85": "\\u0085"})


def jsonl_line(record: dict[str, Any]) -> str:
    """One JSON line. Unicode line separators are escaped too: readers that split on them
    (``str.splitlines``, many editors) would otherwise cut a record in two."""
    return json.dumps(record, ensure_ascii=False).translate(_LINE_BREAKERS) + "\n"


class JsonlSink:
    """Writes each document's Dolma record as its own file, atomically."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def write(self, document: FinishedDocument) -> None:
        """Write the record of a document that produced text (ok or partial)."""
        if not document.has_output:
            return
        record = jsonl_line(dolma_record(document.result, document.meta))
        self.store.write_bytes(results_key(document.doc_id), record.encode())

    def close(self) -> None:
        """Nothing buffered."""
