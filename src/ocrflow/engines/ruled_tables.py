"""Tables whose rows are told apart by ruled lines, not by gaps.

A certificate's or an invoice's table often wraps its cells over several lines, and its
rows lie no further apart than the lines inside a cell: ``tables.py``, which finds rows by
gaps, sees three columns of paragraphs, and the page is read down each column (labels,
then descriptions, then values). The rules under the rows (``rules.py``) say where each
row ends. Rules one under the other across about the same width make a stack; the lines
between two rules of a stack that are at most ``MAX_ROW`` text heights apart form a row.
Two such rows or more, one after the other, over columns that no line of theirs crosses
(gaps of ``MIN_GUTTER`` text heights), are a table when two of its rows have two cells or
more, and no line outside its rows stands level with one of its lines (a form's fields,
ruled under their captions, whose rows go on past the rules): each cell is its lines in
reading order, joined. Pure functions, no I/O.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from statistics import median

from ocrflow.engines.bands import left_edge, level, right_edge, split_columns
from ocrflow.engines.rules import Rule
from ocrflow.engines.tables import Box, Table

#: Rules of a stack span about the same width: their ends this share of it apart at most.
SAME_SPAN = 0.1
#: A row is at most this many text heights high (more: a boxed paragraph, a page frame) ...
MAX_ROW = 10.0
#: ... and its columns apart by gaps of this many text heights.
MIN_GUTTER = 0.8


def find_ruled_tables(boxes: Sequence[Box], rules: Sequence[Rule]) -> list[Table]:
    """Tables among ``boxes`` whose rows lie between ``rules`` (both in the image's pixels,
    boxes as detected), top to bottom; see the module docstring."""
    if len(boxes) < 4 or len(rules) < 3:
        return []
    height = median(box.text_height for box in boxes)
    tables: list[Table] = []
    taken: set[int] = set()
    for stack in _stacks(rules):
        rows: list[list[Box]] = []
        for upper, lower in itertools.pairwise(stack):
            row = [b for b in boxes if id(b) not in taken and _between(b, upper, lower, height)]
            tall = _middle(lower) - _middle(upper)
            if row and tall <= MAX_ROW * height:
                rows.append(row)
                continue
            tables += _table(rows, boxes, height, taken)
            rows = []
        tables += _table(rows, boxes, height, taken)
    return sorted(tables, key=lambda table: min(box.y0 for box in table.boxes))


def _stacks(rules: Sequence[Rule]) -> list[list[Rule]]:
    """The rules in stacks of like span, each top to bottom."""
    stacks: list[list[Rule]] = []
    for rule in rules:  # top to bottom
        for stack in stacks:
            last = stack[-1]
            span = max(rule.x1 - rule.x0, last.x1 - last.x0)
            if abs(rule.x0 - last.x0) <= SAME_SPAN * span and abs(rule.x1 - last.x1) <= (
                SAME_SPAN * span
            ):
                stack.append(rule)
                break
        else:
            stacks.append([rule])
    return [stack for stack in stacks if len(stack) >= 3]


def _middle(rule: Rule) -> float:
    return (rule.y0 + rule.y1) / 2


def _between(box: Box, upper: Rule, lower: Rule, height: float) -> bool:
    """Whether ``box``'s middle lies between the two rules and within their span, give or
    take a text ``height`` (a faint rule's ends are found a little short)."""
    x, y = (box.x0 + box.x1) / 2, (box.y0 + box.y1) / 2
    left, right = min(upper.x0, lower.x0) - height, max(upper.x1, lower.x1) + height
    return left <= x <= right and upper.y_at(x) < y < lower.y_at(x)


def _table(
    rows: list[list[Box]], boxes: Sequence[Box], height: float, taken: set[int]
) -> list[Table]:
    """``rows`` as a table, when they make one (the module docstring) and no other of the
    page's ``boxes`` stands level with one of their lines (a form's fields ruled under
    their captions, beside labels that are not: the rows go on outside the rules);
    ``taken`` is given their boxes."""
    if len(rows) < 2 or _rows_go_on(rows, boxes):
        return []
    found = split_columns([box for row in rows for box in row], MIN_GUTTER * height)
    columns = [(left_edge(column), right_edge(column)) for column in found]
    if len(columns) < 2:
        return []
    cells = [_row_cells(row, columns) for row in rows]
    if sum(1 for row in cells if sum(1 for cell in row if cell) >= 2) < 2:
        return []
    ordered = [box for row in cells for cell in row for box in cell]
    taken.update(id(box) for box in ordered)
    texts = tuple(tuple(" ".join(b.text.strip() for b in cell) for cell in row) for row in cells)
    return [Table(tuple(ordered), texts)]


def _rows_go_on(rows: list[list[Box]], boxes: Sequence[Box]) -> bool:
    """Whether a box not in ``rows`` stands level with one of their boxes."""
    inside = {id(box) for row in rows for box in row}
    top, bottom = min(b.y0 for row in rows for b in row), max(b.y1 for row in rows for b in row)
    others = [b for b in boxes if id(b) not in inside and b.y1 > top and b.y0 < bottom]
    return any(level(a, b) for row in rows for a in row for b in others)


def _row_cells(row: list[Box], columns: list[tuple[float, float]]) -> list[list[Box]]:
    """The row's boxes by column, each cell's in reading order."""
    return [
        _in_reading_order([b for b in row if left <= (b.x0 + b.x1) / 2 <= right])
        for left, right in columns
    ]


def _in_reading_order(boxes: list[Box]) -> list[Box]:
    """Lines top to bottom; boxes of one line (their middles within half a height) left
    to right."""
    ordered: list[Box] = []
    for box in sorted(boxes, key=lambda b: (b.y0 + b.y1) / 2):
        line_start = len(ordered)
        while line_start > 0 and _same_line(ordered[line_start - 1], box):
            line_start -= 1
        line = sorted([*ordered[line_start:], box], key=lambda b: b.x0)
        ordered[line_start:] = line
    return ordered


def _same_line(a: Box, b: Box) -> bool:
    return abs((a.y0 + a.y1) / 2 - (b.y0 + b.y1) / 2) <= 0.5 * min(a.text_height, b.text_height)
