"""Reading order of a page's regions: recursive XY-cut with column detection over line boxes.

1. **Page furniture.** A short band of lines at the very top (bottom) of the page, set
   apart from the body by a wider gap than paragraphs have, is the running header
   (footer): it is read first (last), never in the middle of a column.
2. **Sections.** The rest is cut into horizontal bands (no line crosses a gap between
   bands). Neighbouring bands that share a gutter, an empty vertical strip with text on
   both sides, belong to the same multi-column section, unless a gap of ``max_join``
   text heights (a figure) parts them; a full-width title or paragraph shares no gutter
   and stands alone.
3. **Columns.** A section is cut at every vertical gap of ``gutter`` text heights that no
   line crosses, and each column is cut again from step 2 (nested columns, side boxes).

What cannot be cut is a leaf, read top to bottom by the caller; stacked leaves without
columns are joined back into one, so a column's paragraphs stay one region. Cutting only
where nothing crosses is what keeps a footer or a caption from landing mid-column: plain
XY-cut reads two columns across whenever their paragraph gaps line up, which step 2's
gutter test prevents. All thresholds are multiples of the median text height. Pure
functions, no I/O.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median
from typing import Protocol, TypeVar


class Box(Protocol):
    """What the cut needs of a box (``layout.TextBox`` has it)."""

    x0: float
    y0: float
    x1: float
    y1: float

    @property
    def text_height(self) -> float: ...


B = TypeVar("B", bound=Box)


@dataclass(frozen=True, slots=True)
class CutOptions:
    """Thresholds in text heights."""

    #: Narrowest vertical gap that separates columns.
    gutter: float = 0.5
    #: Widest gap between bands of one multi-column section.
    max_join: float = 3.0
    #: A header (footer) band is at most this tall, and set off by at least ``furniture_gap``.
    furniture_height: float = 2.5
    furniture_gap: float = 1.2
    #: ... and lies within this share of the text's height from its top (bottom).
    furniture_zone: float = 0.1


#: The role of a region: the running header, the body, or the running footer.
HEADER, BODY, FOOTER = "header", "body", "footer"


def reading_regions(boxes: Sequence[B], options: CutOptions | None = None) -> list[list[B]]:
    """``boxes`` grouped into regions, the regions in reading order (module docstring)."""
    return [region for _, region in labelled_regions(boxes, options)]


def labelled_regions(
    boxes: Sequence[B], options: CutOptions | None = None
) -> list[tuple[str, list[B]]]:
    """``reading_regions`` with each region's role: ``HEADER``, ``BODY`` or ``FOOTER``."""
    if not boxes:
        return []
    options = options or CutOptions()
    height = median(b.text_height for b in boxes)
    header, body, footer = _furniture(list(boxes), height, options)
    regions = [(BODY, region) for region in _cut(body, height, options)] if body else []
    head = [(HEADER, header)] if header else []
    return head + regions + ([(FOOTER, footer)] if footer else [])


def _furniture(
    boxes: list[B], height: float, options: CutOptions
) -> tuple[list[B], list[B], list[B]]:
    """Header band, body, footer band (either band may be empty)."""
    bands = _bands(boxes)
    if len(bands) < 3:
        return [], boxes, []
    top, bottom = min(b.y0 for b in boxes), max(b.y1 for b in boxes)
    zone = options.furniture_zone * (bottom - top)
    header = _is_furniture(bands[0], bands[1], height, options) and _y1(bands[0]) - top <= zone
    footer = (
        _is_furniture(bands[-1], bands[-2], height, options) and bottom - _y0(bands[-1]) <= zone
    )
    body = [b for band in bands[int(header) : len(bands) - int(footer)] for b in band]
    return (bands[0] if header else []), body, (bands[-1] if footer else [])


def _is_furniture(band: list[B], neighbour: list[B], height: float, options: CutOptions) -> bool:
    tall = _y1(band) - _y0(band)
    gap = max(_y0(band) - _y1(neighbour), _y0(neighbour) - _y1(band))
    return tall <= options.furniture_height * height and gap >= options.furniture_gap * height


def _cut(boxes: list[B], height: float, options: CutOptions) -> list[list[B]]:
    if len(boxes) < 2:
        return [boxes]
    sections = _sections(_bands(boxes), height, options)
    if len(sections) > 1:
        return _join_plain([_cut(section, height, options) for section in sections])
    columns = _columns(boxes, options.gutter * height)
    if len(columns) > 1:
        return [region for column in columns for region in _cut(column, height, options)]
    return [sorted(boxes, key=lambda b: (b.y0, b.x0))]


def _join_plain(parts: list[list[list[B]]]) -> list[list[B]]:
    """Concatenate the sections' regions, joining neighbouring one-region sections."""
    regions: list[list[B]] = []
    plain_before = False
    for part in parts:
        plain = len(part) == 1
        if plain and plain_before:
            regions[-1] = regions[-1] + part[0]
        else:
            regions.extend(part)
        plain_before = plain
    return regions


def _bands(boxes: list[B]) -> list[list[B]]:
    """Boxes in horizontal bands: a band ends where no box crosses the gap below it."""
    bands: list[list[B]] = []
    bottom = -float("inf")
    for box in sorted(boxes, key=lambda b: b.y0):
        if box.y0 >= bottom:
            bands.append([])
        bands[-1].append(box)
        bottom = max(bottom, box.y1) if box.y0 < bottom else box.y1
    return bands


def _sections(bands: list[list[B]], height: float, options: CutOptions) -> list[list[B]]:
    """Neighbouring bands that share a gutter, joined (module docstring, step 2)."""
    left = min(b.x0 for band in bands for b in band)
    right = max(b.x1 for band in bands for b in band)
    width = options.gutter * height
    sections = [list(bands[0])]
    for last, band in itertools.pairwise(bands):
        close = _y0(band) - _y1(last) < options.max_join * height
        if close and _share_gutter(last, band, sections[-1], (left, right, width)):
            sections[-1].extend(band)
        else:
            sections.append(list(band))
    return sections


def _share_gutter(
    last: list[B], band: list[B], section: list[B], frame: tuple[float, float, float]
) -> bool:
    """Whether an empty strip ``width`` wide runs through ``last`` and ``band`` with text
    of the section on either side (``frame``: left, right, width). The text either side
    need not reach these bands: a column may end early, a figure label stand alone."""
    left, right, width = frame
    both = section + band
    inner_left = min(x.x1 for x in both)
    inner_right = max(x.x0 for x in both)
    for a0, a1 in _free(last, left, right, width):
        for b0, b1 in _free(band, left, right, width):
            if max(a0, b0, inner_left) + width <= min(a1, b1, inner_right):
                return True
    return False


def _free(band: list[B], left: float, right: float, width: float) -> list[tuple[float, float]]:
    """Empty x-intervals of ``band`` between ``left`` and ``right``, at least ``width``."""
    gaps, reach = [], left
    for box in sorted(band, key=lambda b: b.x0):
        if box.x0 - reach >= width:
            gaps.append((reach, box.x0))
        reach = max(reach, box.x1)
    if right - reach >= width:
        gaps.append((reach, right))
    return gaps


def _columns(boxes: list[B], gutter: float) -> list[list[B]]:
    """Boxes split at every vertical gap at least ``gutter`` wide, left to right."""
    columns: list[list[B]] = []
    reach = -float("inf")
    for box in sorted(boxes, key=lambda b: b.x0):
        if box.x0 - reach >= gutter:
            columns.append([])
        columns[-1].append(box)
        reach = max(reach, box.x1)
    return columns


def _y0(band: list[B]) -> float:
    return min(b.y0 for b in band)


def _y1(band: list[B]) -> float:
    return max(b.y1 for b in band)
