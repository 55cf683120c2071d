"""Outputs: one Markdown file and one Dolma-style JSONL record per document."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from ocrflow.names import safe_relpath
from ocrflow.storage import Store
from ocrflow.types import DocStatus, DocumentResult, PageResult

FIGURE_LINK = re.compile(r"\]\((figures/[^)]+)\)")
PAGE_JOINER = "\n\n"


@dataclass(frozen=True, slots=True)
class DocumentMeta:
    """What the sinks need to know about a document besides its pages."""

    rel: str
    content_sha256: str
    created: float | None
    engine: str
    fingerprint: str


def markdown_key(rel: str) -> str:
    """Where a document's Markdown goes: ``markdown/<rel>.md``."""
    return f"markdown/{safe_relpath(rel)}.md"


def results_key(doc_id: str) -> str:
    """Where a document's JSONL record goes."""
    return f"results/{doc_id}.jsonl"


def assemble_text(pages: tuple[PageResult, ...]) -> tuple[str, list[list[int]]]:
    """Join page texts and return ``[start, end, page]`` spans that index into the result."""
    chunks: list[str] = []
    spans: list[list[int]] = []
    cursor = 0
    for page in sorted(pages, key=lambda p: p.page):
        if chunks:
            chunks.append(PAGE_JOINER)
            cursor += len(PAGE_JOINER)
        text = page.text.strip()
        chunks.append(text)
        spans.append([cursor, cursor + len(text), page.page])
        cursor += len(text)
    return "".join(chunks), spans


def render_markdown(pages: tuple[PageResult, ...], *, page_separator: bool) -> str:
    """The document's Markdown; with ``page_separator``, an HTML comment marks each page."""
    parts = []
    for page in sorted(pages, key=lambda p: p.page):
        text = page.text.strip()
        parts.append(f"<!-- page {page.page} -->\n\n{text}" if page_separator else text)
    return PAGE_JOINER.join(p for p in parts if p) + "\n"


def dolma_record(result: DocumentResult, meta: DocumentMeta) -> dict[str, Any]:
    """One Dolma-style record (``id``, ``text``, ``source``, ``added``, ``created``, …)."""
    text, spans = assemble_text(result.pages)
    pages = sorted(result.pages, key=lambda p: p.page)
    return {
        "id": result.doc_id,
        "text": text,
        "source": "ocrflow",
        "added": _iso(None),
        "created": _iso(meta.created),
        "metadata": {
            "Source-File": result.source,
            "source_path": meta.rel,
            "content_sha256": meta.content_sha256,
            "pdf-total-pages": result.page_count,
            "pages_converted": len(pages),
            "engine": meta.engine,
            "routes": dict(Counter(str(p.route) for p in pages)),
            "status": str(result.status),
            "config_fingerprint": meta.fingerprint,
        },
        "attributes": {
            "pdf_page_numbers": spans,
            "page_routes": _page_attr(pages, spans, lambda p: str(p.route)),
            "page_status": _page_attr(pages, spans, lambda p: str(p.status)),
            "page_rotation": _page_attr(pages, spans, lambda p: p.attributes.get("rotation", 0)),
        },
    }


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


def relink_figures(markdown: str, depth: int) -> str:
    """Figure links are relative to OUT; rewrite them for a file ``depth`` folders below it."""
    return FIGURE_LINK.sub(lambda m: "](" + "../" * depth + m.group(1) + ")", markdown)


class DocumentSink:
    """Writes a finished document's Markdown and JSONL record, each atomically."""

    def __init__(self, store: Store, *, page_separator: bool) -> None:
        self.store = store
        self.page_separator = page_separator

    def write(self, result: DocumentResult, meta: DocumentMeta) -> None:
        """Write outputs for a document that produced text (ok or partial)."""
        if result.status is DocStatus.FAILED or not result.pages:
            return
        markdown = render_markdown(result.pages, page_separator=self.page_separator)
        key = markdown_key(meta.rel)
        markdown = relink_figures(markdown, depth=key.count("/"))
        self.store.write_bytes(key, markdown.encode())
        record = jsonl_line(dolma_record(result, meta))
        self.store.write_bytes(results_key(result.doc_id), record.encode())
