"""Tables from OCR line boxes: rows by vertical overlap, columns by horizontal alignment.

The detector gives one box per run of words and leaves a gap at every cell border, so a
table is a run of rows of two or more boxes whose x-ranges line up from row to row. A row
joins the table above it when it is close (under ``max_row_gap`` text heights: a blank
line inside a table is common) and each of its cells falls into at most one of the
table's columns, no two into the same one; a box under no column opens a new column. A
line that spans several columns (a full-width paragraph, "Due: …" under two columns) ends
the table.

As many cells as the table has columns pair up left to right, whatever their overlap:
printed tables are often a little off (a right-aligned number under a left-aligned
heading). Two columns of prose line up just as well, so a table must have a narrow column
(median cell under ``narrow`` text heights: numbers, codes, short labels; newspaper and
paper columns are 20 and more text heights wide), at most one column of prose (cells of
four words and more, as a newspaper's narrow columns have) and not the first one (a
description beside labels is a table, labels beside a paragraph are a side box), no gap
between neighbouring columns as wide as a page gutter of a spread, and three rows or more.
A key-value form ("Name" beside its value) is a two-column table by the same rules. Pure
functions, no I/O.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median
from typing import Protocol

from ocrflow.engines import bands


class Box(bands.Box, Protocol):
    """What the table finder needs of a line box: the cut's box and its text
    (``layout.TextBox`` has it)."""

    @property
    def text(self) -> str: ...


@dataclass(frozen=True, slots=True)
class Table:
    """A found table: its boxes (to take out of the running text) and its cell texts."""

    boxes: tuple[Box, ...]
    rows: tuple[tuple[str, ...], ...]

    def markdown(self) -> str:
        """The table in Markdown, its first row as the header."""
        lines = [_markdown_row(self.rows[0]), _markdown_row(("---",) * len(self.rows[0]))]
        lines += [_markdown_row(row) for row in self.rows[1:]]
        return "\n".join(lines)


def _markdown_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


@dataclass(slots=True)
class _Draft:
    """A table being grown row by row: column x-ranges and, per row, boxes by column."""

    columns: list[list[float]]
    rows: list[dict[int, list[Box]]]
    y1: float


@dataclass(frozen=True, slots=True)
class TableOptions:
    """Thresholds, in text heights unless said otherwise."""

    #: Boxes of a row closer than this are one cell.
    cell_gap: float = 0.3
    #: Boxes wider than this are prose lines, never cells (a paragraph beside a side box).
    wide: float = 15.0
    #: Widest vertical gap between two rows of a table.
    max_row_gap: float = 1.6
    #: A table needs a column whose median cell is at most this wide ...
    narrow: float = 8.0
    #: ... no gap between neighbouring columns wider than this (wider: a page gutter) ...
    max_column_gap: float = 8.0
    #: ... at most one column of prose, not the first (median cell of this many words) ...
    prose_words: int = 4
    #: ... and at least this many rows of two cells or more (a count).
    min_rows: int = 3


def find_tables(boxes: Sequence[Box], options: TableOptions | None = None) -> list[Table]:
    """Tables among ``boxes`` (deskewed, upright), top to bottom; see the module docstring."""
    if len(boxes) < 4:
        return []
    options = options or TableOptions()
    height = median(b.text_height for b in boxes)
    drafts, draft = [], None
    cells = [b for b in boxes if b.x1 - b.x0 <= options.wide * height]
    for row in _rows(cells, options.cell_gap * height):
        if draft is not None and _extends(
            draft, row, options.max_row_gap * height, options.max_column_gap * height
        ):
            continue
        if draft is not None:
            drafts.append(draft)
        draft = _Draft([list(_span(c)) for c in row], [dict(enumerate(row))], _bottom(row))
        if len(row) < 2:
            draft = None
    if draft is not None:
        drafts.append(draft)
    return [_finish(d) for d in drafts if _is_table(d, height, options)]


def _rows(boxes: Sequence[Box], cell_gap: float) -> list[list[list[Box]]]:
    """Boxes in rows (vertical centres inside the row's span), each row a list of cells
    left to right, a cell a list of boxes closer than ``cell_gap``."""
    rows: list[list[Box]] = []
    for box in sorted(boxes, key=lambda b: (b.y0 + b.y1) / 2):
        centre = (box.y0 + box.y1) / 2
        if rows and min(b.y1 for b in rows[-1]) > centre > max(b.y0 for b in rows[-1]) - 1:
            rows[-1].append(box)
        else:
            rows.append([box])
    return [_cells(sorted(row, key=lambda b: b.x0), cell_gap) for row in rows]


def _cells(row: list[Box], cell_gap: float) -> list[list[Box]]:
    cells = [[row[0]]]
    for box in row[1:]:
        if box.x0 - max(b.x1 for b in cells[-1]) < cell_gap:
            cells[-1].append(box)
        else:
            cells.append([box])
    return cells


def _bottom(row: list[list[Box]]) -> float:
    return max(b.y1 for cell in row for b in cell)


def _extends(draft: _Draft, row: list[list[Box]], max_gap: float, max_off: float) -> bool:
    """Add ``row`` to ``draft`` when it fits its columns (see the module docstring); a cell
    lies at most ``max_off`` beside its column. Cells further than that from every column
    are other text at the row's height (a paragraph's last line beside a side box's table)
    and stay out of it."""
    top = min(b.y0 for cell in row for b in cell)
    if top - draft.y1 > max_gap:
        return False
    row = [cell for cell in row if min(_off(c, cell) for c in draft.columns) <= max_off]
    if not row or (len(row) < 2 and not _continues(draft.columns, row[0])):
        return False
    placed = _place(draft.columns, row, max_off)
    if placed is None:
        return False
    for key, cell in list(placed.items()):
        x0, x1 = _span(cell)
        if key < 0:
            draft.columns.append([x0, x1])
            placed[len(draft.columns) - 1] = placed.pop(key)
        else:
            column = draft.columns[key]
            column[0], column[1] = min(column[0], x0), max(column[1], x1)
    draft.rows.append(placed)
    draft.y1 = _bottom(row)
    return True


def _continues(columns: list[list[float]], cell: list[Box]) -> bool:
    """Whether a lone cell continues a row: it lies under one column, not the first (a
    wrapped value of a key-value form, a second line of a cell)."""
    x0, x1 = _span(cell)
    hits = [c0 for c0, c1 in columns if min(x1, c1) > max(x0, c0)]
    return len(hits) == 1 and hits[0] > min(c0 for c0, _ in columns)


def _place(
    columns: list[list[float]], row: list[list[Box]], max_off: float
) -> dict[int, list[Box]] | None:
    """Column index of each cell (negative: a new column), or None when the row does not
    fit. As many cells as columns pair up left to right (printed tables are often a little
    off: a right-aligned number under a left-aligned heading), each at most ``max_off``
    beside its column: further off, it is other text at the height of the row (the last
    line of a paragraph beside a side box's key-value table, next to a wrapped value with
    no key); fewer go to the column they overlap most (or the nearest); more must each
    overlap at most one column."""
    order = sorted(range(len(columns)), key=lambda i: columns[i][0])
    if len(row) == len(columns):
        paired = dict(zip(order, row, strict=True))
        if all(_off(columns[i], cell) <= max_off for i, cell in paired.items()):
            return paired
        return None
    placed: dict[int, list[Box]] = {}
    for cell in row:
        x0, x1 = _span(cell)
        overlaps = [min(x1, c1) - max(x0, c0) for c0, c1 in columns]
        hits = [i for i, overlap in enumerate(overlaps) if overlap > 0]
        if len(row) < len(columns):
            centre = (x0 + x1) / 2
            best = max(
                range(len(columns)), key=lambda i: (overlaps[i], -abs(sum(columns[i]) / 2 - centre))
            )
            hits = [best]
        if len(hits) > 1 or (hits and hits[0] in placed):
            return None
        placed[hits[0] if hits else -1 - len(placed)] = cell
    return placed


def _off(column: list[float], cell: list[Box]) -> float:
    """How far ``cell`` lies beside ``column`` (0 where they overlap)."""
    x0, x1 = _span(cell)
    return max(0.0, column[0] - x1, x0 - column[1])


def _span(cell: list[Box]) -> tuple[float, float]:
    return min(b.x0 for b in cell), max(b.x1 for b in cell)


def _is_table(draft: _Draft, height: float, options: TableOptions) -> bool:
    """Enough rows, two columns or more, one of them narrow, none far from the next, none
    of prose (not columns of a page or two pages of a spread read across)."""
    full_rows = sum(len(row) > 1 for row in draft.rows)
    if full_rows < options.min_rows or len(draft.columns) < 2:
        return False
    spans = sorted(draft.columns)
    gaps = (right[0] - left[1] for left, right in itertools.pairwise(spans))
    if max(gaps) > options.max_column_gap * height:
        return False
    widths: dict[int, list[float]] = {}
    words: dict[int, list[int]] = {}
    for row in draft.rows:
        for key, cell in row.items():
            widths.setdefault(key, []).append(_span(cell)[1] - _span(cell)[0])
            words.setdefault(key, []).append(sum(len(b.text.split()) for b in cell))
    order = sorted(words, key=lambda key: draft.columns[key][0])
    prose = [median(words[key]) >= options.prose_words for key in order]
    # One column of prose is a description beside labels; prose first, or more of it, is
    # a page's columns (or prose beside a side box) read across.
    if sum(prose) > 1 or prose[0]:
        return False
    return any(median(w) <= options.narrow * height for w in widths.values())


def _finish(draft: _Draft) -> Table:
    """Cell texts in column order (columns sorted left to right; empty cells "")."""
    order = sorted(range(len(draft.columns)), key=lambda i: draft.columns[i][0])
    rows = tuple(
        tuple(" ".join(b.text.strip() for b in row.get(i, [])) for i in order) for row in draft.rows
    )
    boxes = tuple(b for row in draft.rows for cell in row.values() for b in cell)
    return Table(boxes, rows)
