"""``--deskew`` without touching the scan: the page's content is drawn turned back by the
skew the engine measured, about the centre of what is shown.

OCRmyPDF deskews by redrawing the page image (decoded, turned, encoded again: new bytes,
often a larger file). Here the page's own content is wrapped in one more transform
(``q <turn> cm … Q``), so the image stream's bytes stay as they were. The corners that
turn out of the page are cut off, as OCRmyPDF's are. Our text layer is not turned with
it (tilted words extract badly): it is laid level where the words now show.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import pikepdf

from ocrflow.document.model import Page
from ocrflow.types import BBox, Block, Line, box_turned_about_centre

#: Below this (degrees) a page is left as it is; above the largest, the measure is more
#: likely a figure's or a table's slant than the page's.
MIN_SKEW = 0.1
MAX_SKEW = 10.0


def straighten(pdf: pikepdf.Pdf, pdf_page: pikepdf.Page, page: Page) -> Page | None:
    """Draw ``pdf_page``'s content turned back by ``page.skew``, and give ``page`` with its
    boxes where the words now show, for a level text layer over them (``None``: the page
    is left as it is). Call it before the text layer is added: the text is not turned
    (its words would tilt), it is laid level at the turned places."""
    skew = page.skew
    if not MIN_SKEW <= abs(skew) <= MAX_SKEW:
        return None
    left, bottom, right, top = (float(v) for v in pdf_page.cropbox)
    centre = ((left + right) / 2, (bottom + top) / 2)
    numbers = " ".join(f"{v:.6f}" for v in turn_about(math.radians(skew), centre))
    pdf_page.contents_add(pdf.make_stream(f"q {numbers} cm\n".encode()), prepend=True)
    pdf_page.contents_add(pdf.make_stream(b"\nQ\n"))
    # Boxes are fractions of the page as shown (its /Rotate applied): turned there.
    width, height = right - left, top - bottom
    if int(pdf_page.obj.get("/Rotate", 0)) % 180:
        width, height = height, width
    turn = BoxTurn(math.radians(skew), width, height)
    return replace(page, blocks=tuple(turn.block(block) for block in page.blocks), skew=0.0)


@dataclass(frozen=True, slots=True)
class BoxTurn:
    """Moves boxes (fractions 0..1 of a ``width`` x ``height`` page, y down) as the page's
    content turns ``angle`` radians counter-clockwise about its centre: each box's centre
    moves, and a line's box shrinks to the line's own height (the box of a sloping line
    was as tall as its slope made it); its words take that height."""

    angle: float
    width: float
    height: float

    def box(self, bbox: BBox | None, level_height: float | None = None) -> BBox | None:
        """Where ``bbox`` shows after the turn, ``level_height`` high (a fraction of the
        page's height) when given."""
        if bbox is None:
            return None
        return box_turned_about_centre(bbox, self.angle, self.width, self.height, level_height)

    def level_height(self, bbox: BBox) -> float:
        """The height of the line whose sloping box is ``bbox``: its box's height less
        what its length times the slope adds (at least a third of the box)."""
        x0, y0, x1, y1 = bbox
        rise = (x1 - x0) * self.width * abs(math.sin(self.angle)) / self.height
        return max((y1 - y0) / 3, (y1 - y0) - rise)

    def line(self, line: Line) -> Line:
        """``line`` with its box and its words' moved, all as high as the line is."""
        height = None if line.bbox is None else self.level_height(line.bbox)
        words = tuple(replace(w, bbox=self.box(w.bbox, height)) for w in line.words)
        return replace(line, bbox=self.box(line.bbox, height), words=words)

    def block(self, block: Block) -> Block:
        """``block`` with its box, its lines' and their words' boxes moved."""
        lines = tuple(self.line(line) for line in block.lines)
        return replace(block, bbox=self.box(block.bbox), lines=lines)


def turn_about(angle: float, centre: tuple[float, float]) -> tuple[float, ...]:
    """The ``cm`` matrix turning by ``angle`` radians counter-clockwise, in PDF space (y up:
    counter-clockwise as shown, whatever the page's ``/Rotate``), about ``centre``. Lines
    that run down to the right by ``angle`` come out level."""
    cos, sin = math.cos(angle), math.sin(angle)
    x, y = centre
    return (cos, sin, -sin, cos, x - cos * x + sin * y, y - sin * x - cos * y)
