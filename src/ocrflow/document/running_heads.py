"""Running heads across a document's pages: the header and footer lines that repeat.

An engine sees one page at a time, and the PDF text layer carries no labels at all, so a
running head ("Chapter 3. Row and column access control", "IBM i 7.3 ... 17") is only told
apart from body text by looking at the whole document: a block in the top (bottom) band of
a page whose text, its numbers set aside, comes back in the same band of other pages is a
running header (footer). A bare page number in either band ("17", "Page 3", "- 3 -", "iv")
is one on its own, even on a one-page document.

Only blocks with boxes vote and only text-like blocks are relabelled: a table, figure or
formula at the top of a page stays what it is, and a section header only becomes a running
head when it repeats. Labels an engine already gave as furniture are kept. The pages' text
is not touched: ``furniture.without_furniture`` cuts by block. Pure functions, no I/O.
"""

from __future__ import annotations

import dataclasses
import re
from collections import defaultdict
from collections.abc import Sequence

from ocrflow.types import Block, BlockLabel, PageResult

#: Share of the page height, from the top (bottom) edge, where running heads sit.
BAND = 0.1
#: A repeated text must be on at least this many pages (itself and two others) ...
MIN_PAGES = 3
#: ... or, in a document of ``LONG_DOCUMENT`` pages or more, on this share of them.
MIN_SHARE = 0.3
LONG_DOCUMENT = 10
#: Running heads are short: a longer block in the band is body text that starts there.
MAX_WORDS = 25

FURNITURE = frozenset({BlockLabel.PAGE_HEADER, BlockLabel.PAGE_FOOTER})
#: What a running head may have been taken for (a table or figure never is one).
RELABELLED = frozenset(
    {BlockLabel.TEXT, BlockLabel.TITLE, BlockLabel.SECTION_HEADER, BlockLabel.FOOTNOTE}
)

#: A page number as printed: "17", "- 3 -", "— 170 —", "xiv", "Page 3", "Page 3 of 12".
_FOLIO = re.compile(
    r"[-–—.|\s]*((page|seite|p\.|pg\.?)\s*)?(\d{1,4}|[ivxlc]{1,7})(\s*(of|/|von)\s*\d{1,4})?"
    r"[-–—.|\s]*",
    re.IGNORECASE,
)
_ROMAN = re.compile(r"(?=[mdclxvi])m{0,3}(cm|cd|d?c{0,3})(xc|xl|l?x{0,3})(ix|iv|v?i{0,3})")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def is_page_number(text: str) -> bool:
    """Whether ``text`` is a page number alone ("17", "Page 3 of 12", "- iv -")."""
    text = " ".join(text.replace("*", "").replace("#", "").split())
    return bool(text) and _FOLIO.fullmatch(text) is not None


def heading_key(text: str) -> str:
    """``text`` as running heads are compared: lower case, words only, every number
    (arabic or roman) the same, so "Chapter 3 ... 17" matches "Chapter 3 ... 18"."""
    words = [w.lower() for w in _WORD.findall(text)]
    return " ".join("#" if w.isdigit() or _ROMAN.fullmatch(w) else w for w in words)


def label_running_heads(pages: Sequence[PageResult]) -> tuple[PageResult, ...]:
    """``pages`` with the blocks of their top and bottom bands that repeat across pages, or
    that are bare page numbers, labelled ``PAGE_HEADER`` / ``PAGE_FOOTER`` (module
    docstring). Pages without boxed blocks are returned as they are."""
    voting = [p for p in pages if any(b.bbox is not None for b in p.blocks)]
    seen: dict[tuple[str, str], set[int]] = defaultdict(set)
    for page in voting:
        for block in page.blocks:
            band = _band(block)
            key = heading_key(block.text) if band else ""
            if band and key and key.strip("# "):
                seen[(band, key)].add(page.page)
    needed = _needed(len(voting))
    # A text that carries a page number at either end ("Copyright ... iii") is a running
    # head as soon as it comes back once: body lines do not end in the page's number.
    repeated = {
        (band, key)
        for (band, key), on in seen.items()
        if len(on) >= (2 if _numbered(key) else needed)
    }
    return tuple(_relabelled(page, repeated) for page in pages)


def _needed(count: int) -> int:
    """Pages a text must be on to count as running: a text on every page of a two-page
    document is one too; a long document asks for a share of its pages."""
    if count < MIN_PAGES:
        return 2  # one page: nothing repeats; two: on both
    if count >= LONG_DOCUMENT:
        return max(MIN_PAGES, round(MIN_SHARE * count))
    return MIN_PAGES


def _numbered(key: str) -> bool:
    words = key.split()
    return len(words) >= 2 and "#" in (words[0], words[-1])


def _relabelled(page: PageResult, repeated: set[tuple[str, str]]) -> PageResult:
    blocks = tuple(_block_label(b, repeated) for b in page.blocks)
    if all(new is old for new, old in zip(blocks, page.blocks, strict=True)):
        return page
    return dataclasses.replace(page, blocks=blocks)


def _block_label(block: Block, repeated: set[tuple[str, str]]) -> Block:
    if block.label in FURNITURE or block.label not in RELABELLED:
        return block
    band = _band(block)
    if not band:
        return block
    running = is_page_number(block.text) or (
        len(block.text.split()) <= MAX_WORDS and (band, heading_key(block.text)) in repeated
    )
    if not running:
        return block
    label = BlockLabel.PAGE_HEADER if band == "top" else BlockLabel.PAGE_FOOTER
    return dataclasses.replace(block, label=label)


def _band(block: Block) -> str:
    """ "top" or "bottom" when the block lies in that band of its page, else ""."""
    if block.bbox is None:
        return ""
    _, y0, _, y1 = block.bbox
    if y1 <= BAND + 0.02 and y0 <= BAND:
        return "top"
    if y0 >= 1 - BAND - 0.02 and y1 >= 1 - BAND:
        return "bottom"
    return ""
