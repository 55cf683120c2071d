"""One Markdown file a document: ``markdown/<input path relative to its root>.md``."""

from __future__ import annotations

from ocrflow.sinks.base import FinishedDocument, page_text
from ocrflow.storage.local import Store
from ocrflow.storage.names import safe_relpath
from ocrflow.types import PageResult

PAGE_JOINER = "\n\n"


def markdown_key(rel: str) -> str:
    """Where a document's Markdown goes: ``markdown/<rel>.md``."""
    return f"markdown/{safe_relpath(rel)}.md"


def render_markdown(
    pages: tuple[PageResult, ...], *, page_separator: bool, doc_id: str = "", prefix: str = ""
) -> str:
    """The document's Markdown; with ``page_separator``, an HTML comment marks each page.

    Figure links lead from the Markdown file to ``figures/``: ``prefix`` is the way up from
    the file's folder to OUT (``markdown_key`` decides the folder, so the link is computed
    here, once, instead of being rewritten afterwards).
    """
    parts = []
    for page in sorted(pages, key=lambda p: p.page):
        text = page_text(doc_id, page, prefix)
        parts.append(f"<!-- page {page.page} -->\n\n{text}" if page_separator else text)
    return PAGE_JOINER.join(p for p in parts if p) + "\n"


class MarkdownSink:
    """Writes each document's Markdown file, atomically."""

    def __init__(self, store: Store, *, page_separator: bool) -> None:
        self.store = store
        self.page_separator = page_separator

    def write(self, document: FinishedDocument) -> None:
        """Write the Markdown of a document that produced text (ok or partial)."""
        if not document.has_output:
            return
        key = markdown_key(document.meta.rel)
        markdown = render_markdown(
            document.result.pages,
            page_separator=self.page_separator,
            doc_id=document.doc_id,
            prefix="../" * key.count("/"),
        )
        self.store.write_bytes(key, markdown.encode())

    def close(self) -> None:
        """Nothing buffered."""
