"""Font sizes of the invisible text layer's lines: what text extractors rebuild the page's
lines, paragraphs and columns from.

poppler's ``pdftotext`` (and the extractors built like it) measures everything in font
sizes: words whose baselines are less than half a size apart share a line, lines whose
sizes differ by over 5 % never share a block, and a gap between lines or columns means a
line break, a paragraph break or a gutter by how many sizes wide it is. So the layer's
sizes have to be those of type set on these lines:

- **One size a block**, or the page's body size when within ``BODY_SPREAD`` of it: sized
  word by word, a two-column page came out with its columns' lines interleaved (CER 0.34
  against 0.018). A heading at a size of its own is a block of its own, which cuts its
  column into blocks; poppler takes four blocks two by two, level and aligned, for a
  table and reads it row by row, across the columns (the linn brochure shown upside down,
  one heading boxed 1.3 times the body's height: CER 0.235 against the Markdown's 0.018;
  0.018 with headings up to 1.6 times the body set at its size).
- **From the distance between lines**, ``LEADING`` of it, where a block has several; from
  the line's own height otherwise, grown as the page's lines are. The engines box lines
  differently: the embedded engine's boxes take in the line spacing, Tesseract's hug the
  ink (a word without ascenders is half a line high). From Tesseract's heights a line
  break measured as a paragraph break, and poppler read the linn brochure's columns in
  pieces (CER 16x the Markdown's; 1.0x sized from the line spacing).
- **No larger than the line's box** over the font's character box (``box``, its ascent
  and descent), so a word found by an extractor lies inside the word as printed.
- **No larger than ``NEIGHBOUR_ROOM`` times the distance to the nearest line above or
  below** it: lines set closer than their sizes (a photographed invoice's bent rows) were
  read as one, their words interleaved.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from statistics import median

from ocrflow.types import BBox

#: Font size over the distance between lines of a block (type set with 25 % leading).
LEADING = 1.25
#: Blocks at most this factor larger or smaller than the page's body size are set at it.
BODY_SPREAD = 1.6
#: A line's size at most this many distances to its nearest neighbour above or below
#: (poppler joins lines whose baselines are under half a size apart).
NEIGHBOUR_ROOM = 1.8


@dataclass(frozen=True, slots=True)
class LineSpan:
    """One line of the layer: its block and the span of its words' boxes (fractions of
    the reading frame, origin top left)."""

    block: int
    x0: float
    top: float
    x1: float
    bottom: float

    @property
    def middle(self) -> float:
        return (self.top + self.bottom) / 2

    @property
    def tall(self) -> float:
        return self.bottom - self.top


def line_spans(words: Iterable[tuple[int, int, BBox]]) -> dict[int, LineSpan]:
    """Each line's span from its words, given as (line, block, box), in reading order."""
    spans: dict[int, LineSpan] = {}
    for line, block, (x0, y0, x1, y1) in words:
        known = spans.get(line)
        if known is not None:
            x0, y0 = min(x0, known.x0), min(y0, known.top)
            x1, y1 = max(x1, known.x1), max(y1, known.bottom)
        spans[line] = LineSpan(block, x0, y0, x1, y1)
    return spans


def lines_by_block(spans: dict[int, LineSpan]) -> list[list[int]]:
    """The lines of each block (lines of no block, -1, left out), blocks and lines in
    reading order."""
    members: dict[int, list[int]] = {}
    for line, span in spans.items():
        if span.block >= 0:
            members.setdefault(span.block, []).append(line)
    return list(members.values())


def line_sizes(spans: dict[int, LineSpan], height: float, box: float) -> dict[int, float]:
    """Each line's font size in points (module docstring); ``height``: the frame's height
    in points, ``box``: the font's character height in sizes."""
    heights: dict[int, list[float]] = {}
    for span in spans.values():
        heights.setdefault(span.block, []).append(span.tall * height)
    steps = _block_steps(spans, height)
    tall = median(h for values in heights.values() for h in values)
    if steps:
        body = min(LEADING * median(s for v in steps.values() for s in v), tall / box)
        grow = max(1.0, body / tall) if tall > 0 else 1.0
    else:
        body, grow = tall, 1.0
    sizes = {}
    for line, span in spans.items():
        if span.block in steps:
            size = LEADING * median(steps[span.block])
            size = min(size, median(heights[span.block]) / box)
        else:
            size = min(span.tall * height * grow, span.tall * height / box)
        sizes[line] = body if body / BODY_SPREAD <= size <= body * BODY_SPREAD else size
    for line, room in _room(spans, sizes, height).items():
        sizes[line] = min(sizes[line], NEIGHBOUR_ROOM * room)
    return sizes


def _block_steps(spans: dict[int, LineSpan], height: float) -> dict[int, list[float]]:
    """The distances in points between the successive lines of each block that are
    stacked as a paragraph's lines are: of one size (not a logo over its caption), one
    under the other (not side by side)."""
    steps: dict[int, list[float]] = {}
    for a, b in itertools.pairwise(spans.values()):
        step = b.middle - a.middle
        low, high = sorted((a.tall, b.tall))
        if a.block == b.block and high <= 2 * low and high / 2 < step < 2.5 * low:
            steps.setdefault(a.block, []).append(step * height)
    return steps


def _room(spans: dict[int, LineSpan], sizes: dict[int, float], height: float) -> dict[int, float]:
    """The distance in points to the nearest line above or below each line (overlapping it
    across), for the lines that have one close enough to limit their size."""
    order = sorted(spans, key=lambda line: spans[line].middle)
    room: dict[int, float] = {}
    for i, line in enumerate(order):
        span, reach = spans[line], sizes[line] / NEIGHBOUR_ROOM / height
        for others in (order[i + 1 :], order[i - 1 :: -1] if i else []):
            for other in others:  # outwards from the line, until out of reach
                near = spans[other]
                distance = abs(near.middle - span.middle)
                if distance >= reach:
                    break
                if near.x0 < span.x1 and span.x0 < near.x1 and distance > 0:
                    reach = distance
                    room[line] = distance * height
                    break
    return room
