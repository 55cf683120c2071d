"""Chunks for retrieval (RAG): ``chunks/<input path relative to its root>.jsonl``.

One JSON line a chunk, in reading order::

    {"doc_id": "…", "source_path": "reports/q1.pdf", "chunk_index": 0,
     "text": "…", "headings": ["Report", "Costs"], "pages": [2, 3],
     "boxes": [{"page": 2, "bbox": [x0, y0, x1, y1]}, …], "labels": ["text", "table"],
     "n_tokens": 412}

How a document is cut is ``sinks.chunking``'s business: sections start chunks, blocks
are packed up to ``max_tokens`` (``--chunk-tokens``, 512 by default), long paragraphs are
split at sentence ends, and tables, formulas and code blocks are never split (one larger
than ``max_tokens`` is a chunk of its own, over the limit). Page headers and footers are
never in chunks. ``headings`` is the chunk's section path; ``text`` does not repeat it.
``boxes`` are fractions 0..1 of the upright page, one per block of the chunk that has a
box (engines that give Markdown only have none). Tokens are ``cl100k_base``
(``sinks.tokens``). Figures appear as their Markdown links (relative to OUT, as in the
JSONL record) with their descriptions.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from ocrflow.document import Block, blocks_from_markdown, linked_blocks
from ocrflow.sinks.base import FinishedDocument, figure_markdown, page_text
from ocrflow.sinks.chunking import Chunk, TokenCounter, chunk_blocks
from ocrflow.sinks.jsonl import jsonl_line
from ocrflow.storage.local import Store
from ocrflow.storage.names import safe_relpath
from ocrflow.types import Figure

#: ``--chunk-tokens``'s default.
DEFAULT_CHUNK_TOKENS = 512


def chunks_key(rel: str) -> str:
    """Where a document's chunks go: ``chunks/<rel>.jsonl``."""
    return f"chunks/{safe_relpath(rel)}.jsonl"


def document_chunks(
    document: FinishedDocument, max_tokens: int, count: TokenCounter | None = None
) -> list[Chunk]:
    """The chunks of a finished document (``count``: ``cl100k_base`` unless given)."""
    if count is None:
        from ocrflow.sinks.tokens import count_tokens

        count = count_tokens
    return chunk_blocks(_page_blocks(document), max_tokens, count)


def _page_blocks(document: FinishedDocument) -> Iterator[tuple[int, Sequence[Block]]]:
    """Each page's blocks, figure placeholders turned into links; a page that has text
    but no blocks gets them from its Markdown's structure."""
    doc_id = document.doc_id

    def link(figure: Figure) -> str:
        return figure_markdown(doc_id, figure)

    for page in sorted(document.result.pages, key=lambda p: p.page):
        if page.blocks:
            yield page.page, linked_blocks(page, link)
        else:
            yield page.page, blocks_from_markdown(page_text(doc_id, page))


def chunk_record(document: FinishedDocument, index: int, chunk: Chunk) -> dict[str, Any]:
    """One chunk's JSON record."""
    return {
        "doc_id": document.doc_id,
        "source_path": document.meta.rel,
        "chunk_index": index,
        "text": chunk.text,
        "headings": list(chunk.headings),
        "pages": list(chunk.pages),
        "boxes": [{"page": page, "bbox": list(box)} for page, box in chunk.boxes],
        "labels": list(chunk.labels),
        "n_tokens": chunk.n_tokens,
    }


class ChunksSink:
    """Writes each document's chunks as one JSONL file, atomically (an empty file for a
    document with no text in its chunks, so every converted document has one)."""

    def __init__(
        self,
        store: Store,
        *,
        max_tokens: int = DEFAULT_CHUNK_TOKENS,
        count: TokenCounter | None = None,
    ) -> None:
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, not {max_tokens}")
        self.store = store
        self.max_tokens = max_tokens
        self.count = count

    def write(self, document: FinishedDocument) -> None:
        """Write the chunks of a document that produced text (ok or partial)."""
        if not document.has_output:
            return
        chunks = document_chunks(document, self.max_tokens, self.count)
        lines = (jsonl_line(chunk_record(document, i, c)) for i, c in enumerate(chunks))
        self.store.write_bytes(chunks_key(document.meta.rel), "".join(lines).encode())

    def close(self) -> None:
        """Nothing buffered."""
