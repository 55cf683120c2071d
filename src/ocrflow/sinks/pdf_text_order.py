"""Lines drawn so that poppler reads them in the Markdown's order: a block in a gutter
drawn out of it (below), a table's rows drawn as lines (``table_rows``).

poppler's ``pdftotext`` orders its blocks by Breuel's rules: a block goes before another
that it overlaps across and starts above, and before one to its right otherwise. It
judges overlapping across on boxes widened towards the blocks under them, as far as the
nearest block beside them. A page number centred under a gutter widens both columns
into it, so they overlap, and the blocks of the page are then read by their tops alone:
the right column starts at the top of the page, the left one goes on under a heading (a
block of its own), and the right column was read before all but the left one's first
block (a two-column page with a centred folio: CER 0.60 against the Markdown's 0.34).

So a block that lies in a gutter (a page number, a centred footer narrower than the
gutter), under two blocks beside each other, is drawn reaching ``REACH`` sizes past the
gutter's right side: poppler then widens the left column by it no more, and the columns'
widened boxes stay apart. Its words are spread along it: a search highlight of the folio
runs into the gutter. It is left as it is where other text on its row stands that near.
"""

from __future__ import annotations

import itertools

import numpy as np

from ocrflow.sinks.pdf_text_gutters import MOST_BLOCKS
from ocrflow.sinks.pdf_text_sizes import LineSpan, lines_by_block

#: Lines are level when they overlap by this share of the lower one's height.
LEVEL = 0.5
#: A table's line is under the one before it when it starts at most this share of that
#: one's height above its bottom (lines of one row overlap more).
WRAP = 0.25
#: How far past the gutter's right side a block in it is drawn, in its sizes.
REACH = 0.1
#: The gap left between the cells of a table row, in sizes (poppler's lines of one block
#: take in words up to 0.7 sizes from their side).
CELL_GAP = 0.3
#: Table rows are drawn in sizes of at most this share of the step to the next row: poppler
#: takes words whose baselines lie within half a size for one line, and a header whose
#: cells stand at staggered heights can give two rows middles closer than that. Never
#: smaller than ``MIN_ROW_SIZE`` points.
ROW_STEP = 0.6
MIN_ROW_SIZE = 1.0


def out_of_gutters(
    spans: dict[int, LineSpan], sizes: dict[int, float], frame: tuple[float, float], box: float
) -> dict[int, tuple[float, float]]:
    """The lines of blocks in a gutter, as ``line: (x0, x1)`` to draw them at (fractions of
    the frame; module docstring). ``spans``: the lines as drawn across, ``sizes``: theirs
    in points (``pdf_text_sizes.py``), ``frame``: its width and height in points, ``box``:
    the font's character height in sizes.

    The gutters are looked for between our blocks (a paragraph, a heading), never wider
    than poppler's, so a gutter that poppler sees is found whatever poppler gathers."""
    blocks = lines_by_block(spans)
    if not 3 <= len(blocks) <= MOST_BLOCKS:  # compared pairwise, as in pdf_text_gutters
        return {}
    width, height = frame
    rows = [
        (
            min(spans[line].x0 for line in lines),
            max(spans[line].x1 for line in lines),
            min(spans[line].middle * height - box / 2 * sizes[line] for line in lines),
            max(spans[line].middle * height + box / 2 * sizes[line] for line in lines),
        )
        for lines in blocks
    ]
    x0, x1, top, bottom = np.array(rows, dtype=np.float64).T
    beside = (top[:, None] < bottom[None, :]) & (top[None, :] < bottom[:, None])
    # Each block's nearest neighbour on its right, where it has one: what bounds poppler's
    # widening of it.
    gap = np.where(beside & (x1[:, None] <= x0[None, :]), x0[None, :] - x1[:, None], np.inf)
    has_right = np.isfinite(gap.min(axis=1))
    right = gap.argmin(axis=1)
    drawn: dict[int, tuple[float, float]] = {}
    for p, lines in enumerate(blocks):
        under = (
            has_right
            & (bottom <= top[p])
            & (bottom[right] <= top[p])
            & (x1 <= x0[p])
            & (x1[p] <= x0[right])
        )
        if not under.any():
            continue
        size = max(sizes[line] for line in lines)
        reach = float(x0[right][under].max()) + REACH * size / width
        row = beside[p] & (x1 > x0[p]) & (x0 < reach + size / width)
        row[p] = False
        if not row.any():
            drawn |= {line: (spans[line].x0, max(spans[line].x1, reach)) for line in lines}
    return drawn


def table_rows(
    spans: dict[int, LineSpan],
    tables: set[int],
    sizes: dict[int, float],
    frame: tuple[float, float],
) -> tuple[dict[int, float], dict[int, tuple[float, float]], dict[int, float]]:
    """Each table row drawn as one line: its cells on the row's middle, as ``line: middle``,
    and each cell but the last reaching to ``CELL_GAP`` sizes short of the next, as
    ``line: (x0, x1)`` (fractions of the frame); and ``sizes`` with the cells of rows
    closer than ``ROW_STEP`` sizes to the next drawn smaller, to that step. ``spans``: the
    lines as drawn across, a table's cells in rows from the top, each row from the left;
    ``tables``: the blocks that are tables; ``frame``: its width and height in points.

    poppler gathers a table's cells column by column otherwise (each column's cells are
    lines of one size, one over the other) and reads the table down its columns, where
    the Markdown reads it row by row (a results table: CER 0.099 against 0.045)."""
    width, height = frame
    middles: dict[int, float] = {}
    across: dict[int, tuple[float, float]] = {}
    sized = dict(sizes)
    rows = _rows(spans, tables)
    for row in rows:
        middles |= dict.fromkeys(row, float(np.median([spans[cell].middle for cell in row])))
        for cell, after in itertools.pairwise(row):
            span, reach = spans[cell], spans[after].x0 - CELL_GAP * sizes[cell] / width
            across[cell] = (span.x0, max(span.x1, reach))
    for upper, lower in itertools.pairwise(rows):
        if spans[upper[0]].block != spans[lower[0]].block:
            continue
        step = (middles[lower[0]] - middles[upper[0]]) * height / ROW_STEP
        for cell in (*upper, *lower):
            sized[cell] = max(min(sized[cell], step), MIN_ROW_SIZE)
    return middles, across, sized


def drawn_by_rows(spans: dict[int, LineSpan], tables: set[int]) -> set[int]:
    """The blocks of ``tables`` whose lines are drawn as rows (``table_rows``): each cell one
    printed line. A table ruled between rows of wrapped cells (a certificate's descriptions,
    ``engines/ruled_tables.py``) gives a cell's lines one under the other, where a table
    of one-line cells goes on across its row or, at a row's end, back to the left: its
    lines are drawn where printed, else poppler would lay a cell's lines over each other."""
    wrapped = set()
    for (_, a), (_, b) in itertools.pairwise(spans.items()):
        under = b.top >= a.bottom - WRAP * a.tall
        if a.block == b.block in tables and under and min(a.x1, b.x1) > max(a.x0, b.x0):
            wrapped.add(a.block)  # the next line under it, in the same column
    return tables - wrapped


def side_by_side(spans: dict[int, LineSpan]) -> set[int]:
    """Blocks of two lines or more, each right of the one before and level with one of
    them: a row of a form read across (``engines/form_rows.py``), drawn as a table's row
    is, else poppler reads the form's label column before its fields."""
    rows = set()
    for lines in lines_by_block(spans):
        row = [spans[line] for line in lines]
        if len(row) >= 2 and all(
            b.x0 > a.x0 and any(_level(b, before) for before in row[:i])
            for i, (a, b) in enumerate(itertools.pairwise(row), start=1)
        ):
            rows.add(row[0].block)
    return rows


def _level(a: LineSpan, b: LineSpan) -> bool:
    return min(a.bottom, b.bottom) - max(a.top, b.top) >= LEVEL * min(a.tall, b.tall)


def _rows(spans: dict[int, LineSpan], tables: set[int]) -> list[list[int]]:
    """The tables' rows of cells: a cell left of the one before it, or under it, starts
    a row."""
    rows: list[list[int]] = []
    for line, span in spans.items():
        if span.block not in tables:
            continue
        last = spans[rows[-1][-1]] if rows else None
        if (
            last is None
            or last.block != span.block
            or span.x0 <= last.x0
            or span.top >= max(spans[cell].bottom for cell in rows[-1])
        ):
            rows.append([line])
        else:
            rows[-1].append(line)
    return rows
