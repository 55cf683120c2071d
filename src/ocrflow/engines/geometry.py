"""Where an OCR engine's findings lie on the page it was sent.

An engine may turn a page to read it (the embedded engine turns sideways and upside-down
pages); its boxes are then in pixels of the turned image. ``PageFrame`` maps them back to
fractions 0..1 of the page as it was sent, origin top left: the upright page of the
document model. ``ocr_blocks`` turns laid-out paragraphs into the model's blocks, and the
quad helpers turn the detector's quadrilaterals with the page. Pure functions, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import median

import numpy as np

from ocrflow.engines.inserts import CAPTION
from ocrflow.engines.layout import Paragraph, TextBox
from ocrflow.engines.xycut import FOOTER, HEADER
from ocrflow.types import BBox, Block, BlockLabel, Line, union_box, unit_box, unit_score, unturn_box

#: Quad corners, float32 array of shape (n, 4, 2): top-left, top-right, bottom-right,
#: bottom-left, in pixels of the page as it is being read.
Quads = np.ndarray

#: A paragraph whose lines are this many times the page's median text height is a heading
#: (at most ``HEADING_LINES`` lines: a large-print paragraph is not).
HEADING_SIZE = 1.5
HEADING_LINES = 2
#: Bullets and numbers that make a paragraph a list item.
LIST_MARKER = re.compile(r"^\s*([•·▪◦●○■□➢►‣⁃*–—-]|\(?\d{1,3}[.)]|\(?[a-z][.)])\s")


@dataclass(frozen=True, slots=True)
class PageFrame:
    """The image an engine read: ``width`` x ``height`` pixels, the page sent to it turned
    ``rotation`` degrees clockwise (0, 90, 180 or 270)."""

    width: int
    height: int
    rotation: int = 0

    def box(self, x0: float, y0: float, x1: float, y1: float) -> BBox:
        """A box in pixels of the read image, as fractions 0..1 of the page sent."""
        return unturn_box(unit_box((x0, y0, x1, y1), self.width, self.height), self.rotation)


def ocr_blocks(paragraphs: Sequence[Paragraph], frame: PageFrame) -> tuple[Block, ...]:
    """One block a paragraph, in the paragraphs' order, each line one detected box."""
    heights = [box.text_height for p in paragraphs for box in p.boxes]
    typical = median(heights) if heights else 0.0
    return tuple(_block(p, frame, typical) for p in paragraphs)


def _block(paragraph: Paragraph, frame: PageFrame, typical: float) -> Block:
    lines = tuple(
        Line(box.text.strip(), frame.box(box.x0, box.y0, box.x1, box.y1), unit_score(box.score))
        for box in paragraph.boxes
    )
    return Block(
        _label(paragraph, typical),
        paragraph.text,
        union_box(line.bbox for line in lines),
        _mean_score(paragraph.boxes),
        lines,
    )


def _label(paragraph: Paragraph, typical: float) -> BlockLabel:
    if paragraph.region == HEADER:
        return BlockLabel.PAGE_HEADER
    if paragraph.region == FOOTER:
        return BlockLabel.PAGE_FOOTER
    if paragraph.region == CAPTION:
        return BlockLabel.CAPTION
    if paragraph.kind == "table":
        return BlockLabel.TABLE
    if LIST_MARKER.match(paragraph.text):
        return BlockLabel.LIST_ITEM
    boxes = paragraph.boxes
    size = median(box.text_height for box in boxes)
    if len(boxes) <= HEADING_LINES and typical and size >= HEADING_SIZE * typical:
        return BlockLabel.SECTION_HEADER
    return BlockLabel.TEXT


def _mean_score(boxes: Iterable[TextBox]) -> float | None:
    """Recognition scores averaged by text length."""
    weighted = [(box.score, len(box.text.strip()) or 1) for box in boxes]
    total = sum(n for _, n in weighted)
    return unit_score(sum(s * n for s, n in weighted) / total) if total else None


def is_sideways(quads: Quads) -> bool:
    """True when most of the text (by length) runs in boxes at least 1.5 times taller than
    wide: the page lies on its side. Squarish boxes (single characters) do not vote."""
    widths = np.linalg.norm(quads[:, 1] - quads[:, 0], axis=1)
    heights = np.linalg.norm(quads[:, 3] - quads[:, 0], axis=1)
    tall = heights[heights >= 1.5 * widths].sum()
    wide = widths[widths >= 1.5 * heights].sum()
    return bool(tall > wide)


def turn_quads_quarter(quads: Quads, height: int) -> Quads:
    """Quads of a page ``height`` px high after turning the page 90° clockwise."""
    return order_corners(np.stack([height - quads[:, :, 1], quads[:, :, 0]], axis=2))


def turn_quads_half(quads: Quads, width: int, height: int) -> Quads:
    """Quads of a ``width`` × ``height`` page after turning it 180°."""
    return order_corners(np.stack([width - quads[:, :, 0], height - quads[:, :, 1]], axis=2))


def order_corners(quads: Quads) -> Quads:
    """Corners as top-left, top-right, bottom-right, bottom-left, as the detector gives
    them: the two left-most points are the left side, each side ordered by y."""
    by_x = np.take_along_axis(quads, np.argsort(quads[:, :, 0], axis=1)[:, :, None], axis=1)
    left, right = _sorted_by_y(by_x[:, :2]), _sorted_by_y(by_x[:, 2:])
    return np.stack([left[:, 0], right[:, 0], right[:, 1], left[:, 1]], axis=1).astype(np.float32)


def _sorted_by_y(pairs: np.ndarray) -> np.ndarray:
    return np.take_along_axis(pairs, np.argsort(pairs[:, :, 1], axis=1)[:, :, None], axis=1)


def line_length(crop: np.ndarray) -> float:
    """A line image's length in text heights."""
    return crop.shape[1] / max(crop.shape[0], 1)
