"""The lines at a multi-column section's edges: whether the last one heads what follows,
and whether a line above stands over the columns apart from them (``xycut.py``, step 2).
Pure functions, no I/O."""

from __future__ import annotations

from ocrflow.engines.bands import (
    B,
    bottom_edge,
    free_strips,
    left_edge,
    right_edge,
    split_columns,
    top_edge,
)

#: A band at most this many text heights high is one line.
ONE_LINE = 1.6


def heads_next(
    section: list[B], tail: list[B], following: list[B], height: float, width: float
) -> bool:
    """Whether ``tail``, the last band of a multi-column ``section`` (its boxes the last of
    the list), is a heading of the section after it rather than the end of a column: one
    short line under every column, which all end level just above it, closer to what
    follows than to them. Column-major reading would put such a heading between the first
    column and the second."""
    if len(tail) == len(section) or not _one_line(tail, height):
        return False
    columns = split_columns(section[: -len(tail)], width)
    if len(columns) < 2 or right_edge(tail) - left_edge(tail) > 0.8 * (
        right_edge(columns[0]) - left_edge(columns[0])
    ):
        return False
    ends = [bottom_edge(column) for column in columns]
    above, below = top_edge(tail) - max(ends), top_edge(following) - bottom_edge(tail)
    return max(ends) - min(ends) <= height and 0.5 * height <= above and below < above


def stands_over(line: list[B], band: list[B], height: float, width: float) -> bool:
    """Whether ``line``, one band of one line standing alone above ``band``, stands over
    the columns that ``band`` begins rather than in one of them: it runs into a gap
    ``width`` wide between ``band``'s lines (a date centred over the page, above a short
    "Abstract" and the right column's first line: the gap between those two is wide, and
    the date, in part of it, shared a gutter with them and was read after "Abstract")."""
    if len(line) != 1 or not _one_line(line, height):
        return False
    (box,) = line
    inner = free_strips(band, left_edge(band), right_edge(band), width)
    return any(box.x0 < end and box.x1 > start for start, end in inner)


def _one_line(band: list[B], height: float) -> bool:
    """Whether ``band`` is one line high (``ONE_LINE`` text heights at most)."""
    return bottom_edge(band) - top_edge(band) <= ONE_LINE * height
