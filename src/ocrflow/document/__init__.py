"""The document model: ``Document`` → ``Page`` → ``Block`` → ``Line`` (→ ``Word``).

The contract between the stages (docs/architecture.md, "The document model"): every engine
and recipe fills what it knows of a page's blocks (labels, boxes in 0..1 of the upright
page, confidences, lines), ``PageResult.blocks`` carries them through checkpoints, done
markers and the JSONL record, and ``document_from_result`` builds the typed document.
``Block``, ``Line``, ``Word`` and ``BlockLabel`` live in ``ocrflow.types`` (every stage
shares them, and that module imports nothing of ours); they are re-exported here.
"""

from __future__ import annotations

from ocrflow.document.markdown import blocks_from_markdown
from ocrflow.document.model import (
    PAGE_JOINER,
    Document,
    Page,
    block_dict,
    block_from_dict,
    document_from_result,
    linked_blocks,
    page_confidence,
    page_from_result,
)
from ocrflow.document.rows import block_from_row, block_to_row, blocks_from_rows, blocks_to_rows
from ocrflow.document.words import block_lines, line_words, plain_lines
from ocrflow.types import BBox, Block, BlockLabel, Line, Word, union_box, unit_box, unturn_box

__all__ = [
    "PAGE_JOINER",
    "BBox",
    "Block",
    "BlockLabel",
    "Document",
    "Line",
    "Page",
    "Word",
    "block_dict",
    "block_from_dict",
    "block_from_row",
    "block_lines",
    "block_to_row",
    "blocks_from_markdown",
    "blocks_from_rows",
    "blocks_to_rows",
    "document_from_result",
    "line_words",
    "linked_blocks",
    "page_confidence",
    "page_from_result",
    "plain_lines",
    "union_box",
    "unit_box",
    "unturn_box",
]
