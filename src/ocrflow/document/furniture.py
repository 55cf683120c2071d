"""Page furniture: running headers, footers and page numbers, which a reader of the text
does not want between two paragraphs (``--drop-headers-footers``).

A page's Markdown and its blocks say the same thing twice: the blocks in reading order, the
text as one string. Dropping a block must drop its words from both, so each block is found
in the text in order (a cursor moves forward, so a header repeated in the body stays in the
body) and the spans of furniture blocks are cut out. Pure functions, no I/O.
"""

from __future__ import annotations

import dataclasses
import re

from ocrflow.types import Block, BlockLabel, DocumentResult, PageResult

FURNITURE = frozenset({BlockLabel.PAGE_HEADER, BlockLabel.PAGE_FOOTER})
_BLANK_RUNS = re.compile(r"\n{3,}")


def is_furniture(block: Block) -> bool:
    """Whether the block is a running header or footer (page numbers are footers)."""
    return block.label in FURNITURE


def without_furniture(result: DocumentResult) -> DocumentResult:
    """The document with its pages' headers and footers left out (text and blocks)."""
    if not any(is_furniture(b) for page in result.pages for b in page.blocks):
        return result
    return dataclasses.replace(result, pages=tuple(page_without_furniture(p) for p in result.pages))


def page_without_furniture(page: PageResult) -> PageResult:
    """The page without its header and footer blocks, their text cut from its Markdown."""
    if not any(is_furniture(b) for b in page.blocks):
        return page
    text, cuts, cursor = page.text, [], 0
    for block in page.blocks:
        needle = block.text.strip()
        at = text.find(needle, cursor) if needle else -1
        if at < 0:
            continue
        if is_furniture(block):
            cuts.append((at, at + len(needle)))
        cursor = at + len(needle)
    for start, end in reversed(cuts):
        text = text[:start] + text[end:]
    text = _BLANK_RUNS.sub("\n\n", text).strip()
    kept = tuple(b for b in page.blocks if not is_furniture(b))
    return dataclasses.replace(page, text=text, blocks=kept)
