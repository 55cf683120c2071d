"""Plain text, one file a document: ``txt/<input path relative to its root>.txt``, as
OCRmyPDF's ``--sidecar`` writes it (``ocrflow run --sidecar``, or ``--format txt``).

OCRmyPDF's sidecar is Tesseract's text output of each page, the pages joined by a form feed
(``\\f``) and none after the last, so the Nth field between form feeds is page N; a page it
did not OCR is ``[OCR skipped on page N]``. Here:

- a page's text is its blocks' printed lines in reading order (``document.words``: the
  engine's lines, else the block's Markdown without its markup), one a line, blocks apart by
  a blank line, ending with a newline: the shape of Tesseract's text output. A page without
  blocks (a Markdown-only model) gives its Markdown's paragraphs, markup taken away the same
  way. Figures have no printed lines, so no text;
- every page of the document has its field: a page read from its own text layer gives that
  text (OCRmyPDF would skip it), a blank or failed page an empty one, a page outside
  ``--pages`` OCRmyPDF's marker;
- a form feed inside a page's text (a text layer may hold one) becomes a space: only pages
  are apart by form feeds.

UTF-8, written atomically through the store; a failed document gets no file.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ocrflow.document.model import Page, page_from_result
from ocrflow.document.words import block_lines, plain_lines
from ocrflow.sinks.base import FinishedDocument
from ocrflow.storage.local import Store
from ocrflow.storage.names import safe_relpath

#: What OCRmyPDF puts between pages.
PAGE_BREAK = "\f"
_PARAGRAPH = re.compile(r"\n[ \t]*\n")


def txt_key(rel: str) -> str:
    """Where a document's plain text goes: ``txt/<rel>.txt``."""
    return f"txt/{safe_relpath(rel)}.txt"


def skipped_page(number: int) -> str:
    """OCRmyPDF's text for a page it did not convert."""
    return f"[OCR skipped on page {number}]"


def page_plain_text(page: Page) -> str:
    """The page's text without markup: its lines in reading order, paragraphs (blocks)
    apart by a blank line, a newline after the last line (``""`` for a page without text)."""
    if page.blocks:
        paragraphs = [[line.text for line in block_lines(block)] for block in page.blocks]
    else:
        paragraphs = [plain_lines(part) for part in _PARAGRAPH.split(page.markdown)]
    # Whitespace runs (a form feed, a tab, a line break inside an engine's line) become one
    # space: only lines end lines, only pages end pages.
    kept = [[" ".join(text.split()) for text in lines] for lines in paragraphs]
    text = "\n\n".join("\n".join(t for t in lines if t) for lines in kept if any(lines))
    return text + "\n" if text else ""


def sidecar_text(pages: Iterable[Page], page_count: int = 0) -> str:
    """The document's sidecar text: a field for each of its ``page_count`` pages (at
    least up to its last converted page), form feeds between them."""
    texts = {page.number: page_plain_text(page) for page in pages}
    last = max([page_count, *texts])
    return PAGE_BREAK.join(texts.get(n, skipped_page(n)) for n in range(1, last + 1))


class SidecarTextSink:
    """Writes each document's plain text (``txt``), atomically."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def write(self, document: FinishedDocument) -> None:
        """Write the text of a document that produced text (ok or partial)."""
        if not document.has_output:
            return
        result = document.result
        text = sidecar_text((page_from_result(p) for p in result.pages), result.page_count)
        self.store.write_bytes(txt_key(document.meta.rel), text.encode("utf-8"))

    def close(self) -> None:
        """Nothing buffered."""
