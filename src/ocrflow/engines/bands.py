"""Line boxes in horizontal bands and vertical columns: the geometry XY-cut is made of
(``xycut.py``) and that the tests of a section's edges share (``section_edges.py``). Pure
functions, no I/O."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, TypeVar


class Box(Protocol):
    """What the cut needs of a box (``layout.TextBox`` has it). Read-only: a frozen
    dataclass is one."""

    @property
    def x0(self) -> float: ...
    @property
    def y0(self) -> float: ...
    @property
    def x1(self) -> float: ...
    @property
    def y1(self) -> float: ...

    @property
    def text_height(self) -> float: ...


B = TypeVar("B", bound=Box)


def horizontal_bands(boxes: list[B]) -> list[list[B]]:
    """Boxes in horizontal bands: a band ends where no box crosses the gap below it."""
    bands: list[list[B]] = []
    bottom = -float("inf")
    for box in sorted(boxes, key=lambda b: b.y0):
        if box.y0 >= bottom:
            bands.append([])
        bands[-1].append(box)
        bottom = max(bottom, box.y1) if box.y0 < bottom else box.y1
    return bands


def free_strips(
    band: list[B], left: float, right: float, width: float
) -> list[tuple[float, float]]:
    """Empty x-intervals of ``band`` between ``left`` and ``right``, at least ``width``."""
    return free_spans(((box.x0, box.x1) for box in band), left, right, width)


def free_spans(
    spans: Iterable[tuple[float, float]], left: float, right: float, width: float
) -> list[tuple[float, float]]:
    """The x-intervals between ``left`` and ``right``, at least ``width`` wide, that no
    (start, end) of ``spans`` covers, left to right."""
    gaps, reach = [], left
    for start, end in sorted(spans):
        if min(start, right) - reach >= width:
            gaps.append((reach, min(start, right)))
        reach = max(reach, end)
    if right - reach >= width:
        gaps.append((reach, right))
    return gaps


def split_columns(boxes: list[B], gutter: float) -> list[list[B]]:
    """Boxes split at every vertical gap at least ``gutter`` wide, left to right."""
    columns: list[list[B]] = []
    reach = -float("inf")
    for box in sorted(boxes, key=lambda b: b.x0):
        if box.x0 - reach >= gutter:
            columns.append([])
        columns[-1].append(box)
        reach = max(reach, box.x1)
    return columns


def left_edge(band: list[B]) -> float:
    return min(b.x0 for b in band)


def right_edge(band: list[B]) -> float:
    return max(b.x1 for b in band)


def top_edge(band: list[B]) -> float:
    return min(b.y0 for b in band)


def bottom_edge(band: list[B]) -> float:
    return max(b.y1 for b in band)


def level(a: Box, b: Box, share: float = 0.5) -> bool:
    """Whether two lines stand level: they overlap down the page by ``share`` of the lower
    one's height at least."""
    overlap = min(a.y1, b.y1) - max(a.y0, b.y0)
    return overlap >= share * min(a.y1 - a.y0, b.y1 - b.y0)
