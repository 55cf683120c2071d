"""Reading order for OCR boxes: lines → regions → blocks → ordered paragraphs → text.

Each detected box is one line: the detector already joins the words of a line, and a gap
it leaves is a column gutter or a table cell, which must stay apart. A page is laid out in
four steps:

1. **Deskew**: the boxes are turned by the page's skew (the median slope of its lines),
   so that rows are level and columns upright, whatever the scanner or camera did;
2. **Tables** (``ruled_tables.py``, ``tables.py``): rows between ruled lines, and rows of
   aligned cells, become one Markdown table each;
3. **Regions** (``xycut.py``): header first, footer last, and between them the body cut
   recursively into sections and columns, in reading order;
4. **Paragraphs**: inside a region, stacked, left-aligned lines of one size chain into
   blocks (a block ends after a short line, so a block is about one paragraph), ordered
   by Breuel's two rules [1] and cut at bullets and first-line indents:

   a. ``a`` comes before ``b`` when their x-ranges overlap and ``a`` is above ``b``;
   b. ``a`` comes before ``b`` when ``a`` is left of ``b`` and no block between them (in
      y) overlaps both in x.

``reading_order="blocks"`` is the former method, step 4 alone over the whole page (kept for
``bench/bench_quality.py``'s before/after). Every distance threshold is a multiple of the
text height, so nothing depends on the image resolution. Pure functions, no I/O.

[1] T. M. Breuel, "High performance document layout analysis", SDIUT 2003.
"""

from __future__ import annotations

import heapq
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import median

import numpy as np

from ocrflow.engines.boxes import TextBlock, TextBox
from ocrflow.engines.inserts import set_inserts_aside
from ocrflow.engines.ruled_tables import find_ruled_tables
from ocrflow.engines.rules import Rule
from ocrflow.engines.skew import deskew
from ocrflow.engines.tables import find_tables
from ocrflow.engines.xycut import BODY, INSERT, ROW, labelled_regions

__all__ = ["Paragraph", "TextBlock", "TextBox", "deskew", "laid_out", "layout_text", "with_tables"]

#: A number as it stands in a table cell: 40, 1,250.00, -3.5, 12%, $9.99, 2024-01-17.
_NUMBER = re.compile(r"[-+(]?[$€£]?\d[\d.,:/%-]*\)?[%€]?")

#: Bullets and list markers that start a new paragraph even without a blank line.
_BULLET = re.compile(r"^\s*([•·▪◦●○■□➢►‣⁃*–—-]|\(?\d{1,3}[.)]|\(?[a-z][.)])\s")


def group_blocks(
    lines: Iterable[TextBox], *, max_gap: float = 0.5, indent: float = 3.0, short: float = 0.2
) -> list[TextBlock]:
    """Stack lines into blocks, top to bottom.

    A line joins the block right above it when the vertical gap is under ``max_gap`` text
    heights (lines of a paragraph sit closer than 0.2 heights apart, paragraphs 0.7 or
    more), the sizes match, its left edge is within ``indent`` heights of the block's and
    it does not stick out on the right. A line shorter than the block by more than
    ``short`` of its width closes the block: it ends a paragraph, or it is the first line of
    a column under a full-width paragraph, and either way the next line starts afresh.
    """
    open_blocks: list[list[TextBox]] = []
    done: list[list[TextBox]] = []
    for line in sorted(lines, key=lambda ln: (ln.y0, ln.x0)):
        block = _block_for(open_blocks, line, max_gap, indent)
        if block is None:
            block = [line]
            open_blocks.append(block)
        else:
            block.append(line)
        if len(block) > 1 and _is_short(block, line, short):
            open_blocks.remove(block)
            done.append(block)
    return [TextBlock.of(block) for block in done + open_blocks]


def _block_for(
    blocks: list[list[TextBox]], line: TextBox, max_gap: float, indent: float
) -> list[TextBox] | None:
    best, best_gap = None, math.inf
    for block in blocks:
        last = block[-1]
        height = max(last.text_height, line.text_height)
        gap = line.y0 - last.y1
        same_size = height <= 1.5 * min(last.text_height, line.text_height)
        if not (-0.5 * height < gap < max_gap * height and same_size and line.cy > last.cy):
            continue
        left = min(ln.x0 for ln in block)
        right = max(ln.x1 for ln in block)
        aligned = abs(line.x0 - left) <= indent * height and line.x1 <= right + indent * height
        if aligned and gap < best_gap:
            best, best_gap = block, gap
    return best


def _is_short(block: list[TextBox], line: TextBox, short: float) -> bool:
    right = max(ln.x1 for ln in block)
    width = right - min(ln.x0 for ln in block)
    return right - line.x1 > max(short * width, 2 * line.text_height)


def order_blocks(blocks: Sequence[TextBlock]) -> list[TextBlock]:
    """Blocks in reading order (Breuel's rules, see the module docstring).

    A topological sort that always takes the top-most free block next; a cycle, which only
    odd layouts make, is broken the same way.
    """
    if len(blocks) < 2:
        return list(blocks)
    before = _precedence(blocks)
    waiting = before.sum(axis=0)
    taken = np.zeros(len(blocks), dtype=bool)
    order: list[int] = []
    heap = [(blocks[i].y0, blocks[i].x0, i) for i in range(len(blocks)) if waiting[i] == 0]
    heapq.heapify(heap)
    while len(order) < len(blocks):
        index = heapq.heappop(heap)[2] if heap else _topmost(blocks, taken)
        if taken[index]:
            continue
        taken[index] = True
        order.append(index)
        for nxt in np.flatnonzero(before[index] & ~taken).tolist():
            waiting[nxt] -= 1
            if waiting[nxt] == 0:
                heapq.heappush(heap, (blocks[nxt].y0, blocks[nxt].x0, int(nxt)))
    return [blocks[i] for i in order]


def _topmost(blocks: Sequence[TextBlock], taken: np.ndarray) -> int:
    free = [i for i in range(len(blocks)) if not taken[i]]
    return min(free, key=lambda i: (blocks[i].y0, blocks[i].x0))


def _precedence(blocks: Sequence[TextBlock]) -> np.ndarray:
    """``before[a, b]``: block ``a`` must be read before block ``b``."""
    x0 = np.array([b.x0 for b in blocks])
    x1 = np.array([b.x1 for b in blocks])
    cx, cy = (x0 + x1) / 2, np.array([b.cy for b in blocks])
    tolerance = 0.5 * median(b.height for b in blocks)
    # Neighbouring columns' boxes can overlap by a few pixels (detector padding, a curved
    # page): stacked blocks share a good part of the narrower one's width, columns don't.
    width = x1 - x0
    share = 0.1 * np.minimum.outer(width, width)
    overlap = (np.minimum.outer(x1, x1) - np.maximum.outer(x0, x0)) > np.maximum(tolerance, share)
    above = cy[:, None] < cy[None, :]
    left = ~overlap & (cx[:, None] < cx[None, :])
    before = overlap & above
    for a in range(len(blocks)):
        candidates = np.flatnonzero(left[a])
        if candidates.size:
            before[a, candidates] = ~_separated(a, candidates, overlap, cy)
    return before


def _separated(a: int, others: np.ndarray, overlap: np.ndarray, cy: np.ndarray) -> np.ndarray:
    """For each ``b`` in ``others``: is there a block between ``a`` and ``b`` in y that
    overlaps both in x (so ``a`` does not simply flow into ``b``)?"""
    low = np.minimum(cy[a], cy[others])[:, None]
    high = np.maximum(cy[a], cy[others])[:, None]
    between = (cy[None, :] > low) & (cy[None, :] < high)
    return (between & overlap[a][None, :] & overlap[others]).any(axis=1)


def split_paragraphs(block: TextBlock) -> list[tuple[TextBox, ...]]:
    """Cut a block into paragraphs at bullets and at first-line indents."""
    paragraphs: list[list[TextBox]] = [[block.lines[0]]]
    for i in range(1, len(block.lines)):
        if _starts_paragraph(block.lines, i):
            paragraphs.append([])
        paragraphs[-1].append(block.lines[i])
    return [tuple(p) for p in paragraphs]


def _starts_paragraph(lines: Sequence[TextBox], i: int) -> bool:
    line, prev = lines[i], lines[i - 1]
    if _BULLET.match(line.text):
        return True
    nxt = lines[i + 1] if i + 1 < len(lines) else None
    indented = line.x0 - prev.x0 > line.text_height
    # A first-line indent: this line is in, the next one comes back out (a hanging indent
    # under a bullet goes in and stays in).
    return indented and nxt is not None and nxt.x0 < line.x0 - 0.5 * line.text_height


@dataclass(frozen=True, slots=True)
class Paragraph:
    """A paragraph (or table) as laid out: its text, its detected boxes (as the detector
    gave them, in reading order), its region's role (``xycut.HEADER``, ``BODY``, ...)."""

    text: str
    boxes: tuple[TextBox, ...]
    kind: str = "line"
    region: str = BODY


def laid_out(
    boxes: Iterable[TextBox], *, reading_order: str = "columns", rules: Sequence[Rule] = ()
) -> list[Paragraph]:
    """The page's paragraphs (and tables, as Markdown) in reading order, lines joined with
    newlines; ``rules``: the page's horizontal rules (``rules.py``), in the boxes' pixels,
    for tables ruled between their rows; ``reading_order="blocks"`` is the former method
    (module docstring)."""
    if reading_order == "blocks":
        return _paragraphs(order_blocks(group_blocks(boxes)), BODY)
    if reading_order != "columns":
        raise ValueError(f"reading_order is 'columns' or 'blocks', not {reading_order!r}")
    lines = [b for b in boxes if b.text.strip()]
    ruled = find_ruled_tables(lines, rules)
    # Found where the rules are drawn, then deskewed with the rest of the page.
    level = dict(zip(map(id, lines), deskew(lines), strict=True))
    taken = {id(box) for table in ruled for box in table.boxes}
    rest = [level[id(box)] for box in lines if id(box) not in taken]
    tables = [_table_box([level[id(b)] for b in t.boxes], t.markdown()) for t in ruled]
    regions = labelled_regions(with_tables(rest) + tables)
    found: list[Paragraph] = []
    for index, (role, region) in enumerate(regions):
        after = regions[index + 1] if index + 1 < len(regions) else None
        if role == INSERT and index > 0 and regions[index - 1][0] == BODY:
            continue  # placed inside the column before it, below
        if role == ROW and all(box.kind != "table" for box in region):
            found.append(_row_paragraph(region))
            continue
        quote = after[1] if role == BODY and after is not None and after[0] == INSERT else []
        found += _region_paragraphs(region, role, quote)
    return found


def _row_paragraph(row: Sequence[TextBox]) -> Paragraph:
    """One row of a form (``form_rows.py``), its lines left to right, as one paragraph."""
    kept = [box for box in row if box.text.strip()]
    detected = tuple(dict.fromkeys(d for box in kept for d in box.detected))
    return Paragraph(" ".join(box.text.strip() for box in kept), detected)


def paragraphs_in_order(boxes: Iterable[TextBox], *, reading_order: str = "columns") -> list[str]:
    """The texts of ``laid_out``."""
    return [paragraph.text for paragraph in laid_out(boxes, reading_order=reading_order)]


def layout_text(boxes: Iterable[TextBox], *, reading_order: str = "columns") -> str:
    """The page's text in reading order: paragraphs and tables apart by a blank line."""
    return "\n\n".join(paragraphs_in_order(boxes, reading_order=reading_order))


def _region_paragraphs(
    region: Sequence[TextBox], role: str, quote: Sequence[TextBox] = ()
) -> list[Paragraph]:
    """Paragraphs of one region: its lines in blocks, each table a block of its own, inserts
    (captions, pull quotes: ``inserts.py``) after the paragraph they interrupt. ``quote``
    is a pull quote across this column and the next (``xycut.INSERT``): it goes after the
    first block under it, where this column's interrupted paragraph goes on."""
    tables = [TextBlock.of([box]) for box in region if box.kind == "table"]
    lines = [box for box in region if box.kind != "table"]
    ordered = order_blocks(group_blocks(lines) + tables)
    if role != BODY:
        return _paragraphs(ordered, role)
    placed = set_inserts_aside(ordered)
    if quote:
        aside = order_blocks(group_blocks(quote))
        bottom = max(box.y1 for box in quote)
        under = [k for k, (block, _) in enumerate(placed) if block.y0 >= bottom - block.height]
        at = under[0] + 1 if under else len(placed)
        placed[at:at] = [(block, INSERT) for block in aside]
    found: list[Paragraph] = []
    for block, insert in placed:
        found += _paragraphs([block], insert or role)
    return found


def _paragraphs(blocks: Iterable[TextBlock], role: str) -> list[Paragraph]:
    found = []
    for block in blocks:
        kind = block.lines[0].kind
        for lines in [block.lines] if kind == "table" else split_paragraphs(block):
            kept = [ln for ln in lines if ln.text.strip()]
            text = "\n".join(ln.text.strip() for ln in kept)
            if text:
                detected = tuple(dict.fromkeys(d for ln in kept for d in ln.detected))
                found.append(Paragraph(text, detected, kind, role))
    return found


def with_tables(boxes: Sequence[TextBox]) -> list[TextBox]:
    """``boxes`` with the lines of each table (``tables.find_tables``) replaced by one box of
    kind "table" that covers them and holds the table as Markdown.

    The detector joins numbers of neighbouring cells into one box ("40 160.00") when the
    page is small; such boxes are offered to the table finder split into one box a number,
    and stay whole unless a table takes them.
    """
    pieces = {id(piece): (piece, box) for box in boxes for piece in _split_numbers(box)}
    tables = find_tables([piece for piece, _ in pieces.values()])
    if not tables:
        return list(boxes)
    taken = {id(box) for table in tables for box in table.boxes}
    cut = {id(pieces[key][1]) for key in taken}
    merged = [box for box in boxes if id(box) not in cut]
    merged += [piece for key, (piece, box) in pieces.items() if id(box) in cut and key not in taken]
    # The tables hold the pieces offered to the finder: the same objects, as TextBoxes.
    merged += [
        _table_box([pieces[id(cell)][0] for cell in table.boxes], table.markdown())
        for table in tables
    ]
    return merged


def _table_box(cells: Sequence[TextBox], markdown: str) -> TextBox:
    return TextBox(
        min(b.x0 for b in cells),
        min(b.y0 for b in cells),
        max(b.x1 for b in cells),
        max(b.y1 for b in cells),
        markdown,
        height=median(b.text_height for b in cells),
        kind="table",
        members=tuple(dict.fromkeys(d for cell in cells for d in cell.detected)),
    )


def _split_numbers(box: TextBox) -> list[TextBox]:
    """``box`` cut into one box a number when its text is numbers only, else ``[box]``;
    each number gets the share of the width its characters take."""
    tokens = box.text.split()
    if len(tokens) < 2 or not all(_NUMBER.fullmatch(t) for t in tokens):
        return [box]
    per_char = (box.x1 - box.x0) / max(len(box.text.strip()), 1)
    pieces, x = [], box.x0
    for token in tokens:
        width = per_char * len(token)
        pieces.append(
            TextBox(
                x, box.y0, x + width, box.y1, token, box.score, box.height, box.angle,
                members=box.detected,
            )
        )  # fmt: skip
        x += width + per_char
    return pieces
