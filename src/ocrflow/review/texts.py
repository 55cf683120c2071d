"""A finished document's text, page by page, as ``sinks.results`` reads it from OUT.

The JSONL record has the whole text and ``pdf_page_numbers`` spans, so each page's Markdown
is known. A run written without JSONL (``--format markdown`` or ``parquet``) has only the
joined Markdown file: the review then shows it whole, under the first page.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ocrflow.document import Page
from ocrflow.sinks.results import markdown_file, stored_document
from ocrflow.storage.local import Store
from ocrflow.workspace.records import DoneRecord


@dataclass(frozen=True, slots=True)
class DocumentText:
    """Each page's Markdown (``pages``), or the whole document's (``whole``) when the run
    kept no page spans; ``origin`` names the output it came from (``""``: none).
    ``models`` are the document model's pages by number (blocks, boxes, confidences): the
    done marker has them even when the run wrote no JSONL."""

    pages: dict[int, str] = field(default_factory=dict)
    whole: str | None = None
    origin: str = ""
    models: dict[int, Page] = field(default_factory=dict)


def read_document_text(store: Store, record: DoneRecord) -> DocumentText:
    """The document's text from its JSONL record, else its Markdown file, else nothing."""
    stored = stored_document(store, record)
    models = {page.number: page for page in stored.document.pages}
    if stored.record is not None:
        pages = {page.number: page.markdown for page in stored.document.pages}
        return DocumentText(pages=pages, origin=stored.record.key, models=models)
    file = markdown_file(store, record.rel)
    if file is not None and file.text:
        return DocumentText(whole=file.text, origin=file.key, models=models)
    return DocumentText(models=models)
