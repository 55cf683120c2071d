"""Sections read across, row by row: a form's labels and fields, not columns of prose.

XY-cut splits a section at every gutter that no line crosses (``xycut.py``). Columns of
prose are read one after the other; but a form's labels, its fields' captions and its
line numbers stand in "columns" of short lines that belong together row by row: "nom:"
beside "prénom", line 12 beside "FO" beside "téléphone:". Read down each column, a form
loses the pairing (a tax form's order-sensitive CER 0.29 against 0.15 read by rows). A
section is a form when its lines are short (median under ``SHORT`` text heights and
``MAX_WORDS`` words: prose lines run 20 heights and more, a newspaper's narrow columns 15
and five words or more) and most lines beside the first column (``ALIGNED``) stand level
with a line of the column left of them. It is then read
row by row: each row of lines level with each other, left to right, is a region of its
own (a ``Row``: the layout makes it one paragraph). Pure functions, no I/O.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from statistics import median

from ocrflow.engines.bands import B, Box, level

#: A form's lines are at most this many text heights long, at the median ...
SHORT = 10.0
#: ... of at most this many words (boxes that carry no text pass) ...
MAX_WORDS = 4
#: ... and this share of the lines beside the first column stand level with one left.
ALIGNED = 0.6
#: Lines are level when they overlap by this share of the lower one's height.
LEVEL = 0.5
#: Lines of like height: the taller at most this many times the other's height.
ALIKE = 1.5
#: A form has at least this many lines.
MIN_LINES = 8


def reads_across(columns: Sequence[Sequence[B]], height: float) -> bool:
    """Whether a section cut into ``columns`` (left to right) is a form, read by rows."""
    lines = [box for column in columns for box in column]
    if len(columns) < 2 or len(lines) < MIN_LINES:
        return False
    if median(box.x1 - box.x0 for box in lines) >= SHORT * height:
        return False
    if median(len(getattr(box, "text", "").split()) for box in lines) > MAX_WORDS:
        return False  # narrow columns of prose, set on one baseline grid
    beside = [(box, left) for left, column in itertools.pairwise(columns) for box in column]
    level_with = sum(1 for box, left in beside if any(level(box, o, LEVEL) for o in left))
    return level_with >= ALIGNED * len(beside)


class Row(list):  # of boxes of any box type (the cut is generic)
    """A region that is one row of a form, its lines left to right: one paragraph."""


def rows_across(boxes: Sequence[B]) -> list[Row]:
    """``boxes`` in rows of lines level with each other, top to bottom, each left to right."""
    rows: list[list[B]] = []
    for box in sorted(boxes, key=lambda b: (b.y0 + b.y1) / 2):
        # Level with a line of the row of like height: a tall box (a caption set on its
        # side across three rows) would chain the rows it spans.
        if rows and any(level(box, other, LEVEL) and _alike(box, other) for other in rows[-1]):
            rows[-1].append(box)
        else:
            rows.append([box])
    return [Row(sorted(row, key=lambda b: b.x0)) for row in rows]


def _alike(a: Box, b: Box) -> bool:
    return max(a.y1 - a.y0, b.y1 - b.y0) <= ALIKE * min(a.y1 - a.y0, b.y1 - b.y0)
