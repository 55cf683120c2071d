"""A finished document's text, page by page, as its outputs hold it.

The JSONL record has the whole text and ``pdf_page_numbers`` spans, so each page's Markdown
is a slice of it. A run written without JSONL (``--format markdown`` or ``parquet``) has only
the joined Markdown file: the review then shows it whole, under the first page.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ocrflow.records import DoneRecord
from ocrflow.sinks import markdown_key, results_key
from ocrflow.storage import Store


@dataclass(frozen=True, slots=True)
class DocumentText:
    """Each page's Markdown (``pages``), or the whole document's (``whole``) when the run
    kept no page spans; ``origin`` names the output it came from (``""``: none)."""

    pages: dict[int, str] = field(default_factory=dict)
    whole: str | None = None
    origin: str = ""


def read_document_text(store: Store, record: DoneRecord) -> DocumentText:
    """The document's text from its JSONL record, else its Markdown file, else nothing."""
    key = results_key(record.doc_id)
    blob = store.read_bytes(key)
    if blob:
        return DocumentText(pages=page_texts(blob.decode("utf-8", "replace")), origin=key)
    if record.rel:
        key = markdown_key(record.rel)
        blob = store.read_bytes(key)
        if blob:
            return DocumentText(whole=blob.decode("utf-8", "replace"), origin=key)
    return DocumentText()


def page_texts(jsonl: str) -> dict[int, str]:
    """Page number → Markdown, from a document's Dolma JSONL record (its first line)."""
    line = jsonl.strip().split("\n", 1)[0] if jsonl.strip() else "{}"
    record = json.loads(line)
    text = str(record.get("text") or "")
    spans = (record.get("attributes") or {}).get("pdf_page_numbers") or []
    return {int(page): text[int(start) : int(end)] for start, end, page in spans}
