"""Blocks of a page's native text: each text line's box, as fractions 0..1 of the page as
shown (its ``/Rotate`` applied, origin top left).

Runs in a render worker beside the text-layer extraction (``textlayer.py``), on the lines
it laid out: one block a paragraph (lines between paragraph breaks), one line a text line.
A line's box is the union of PDFium's rectangles for its characters (``FPDFText_CountRects``
and ``GetRect``, from its first visible character to its last, whose indices the extraction
found for the paragraph breaks): the order PDFium gives characters in is not always the
order on the page (a page shown upside down reads its words backwards), so the ends alone
would not do. Rectangles are in PDF points (origin bottom left) and are mapped to the shown
page by the page's own display matrix (``FPDF_PageToDevice``), read once a page.
The result is plain frozen data: it pickles back to the parent process cheaply.
"""

from __future__ import annotations

import ctypes
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from ocrflow.types import BOX_DIGITS, BBox, Block, BlockLabel, Line, union_box

#: A rectangle in PDF points: left, top, right, bottom (origin bottom left).
Rect = tuple[float, float, float, float]
#: A non-blank text line: its index, the loose boxes of its first and last visible
#: characters, and their character indices.
LineEnds = tuple[int, Rect, Rect, int, int]

#: Device size used to read the page's display matrix (integer pixels, so large).
_DEVICE = 1_000_000
#: Points between the probes of the display matrix (far apart: device pixels are integers).
_PROBE_STEP = 1000.0
_PROBES = ((0.0, 0.0), (_PROBE_STEP, 0.0), (0.0, _PROBE_STEP))
#: Bullets and numbers that make a paragraph a list item.
_LIST_MARKER = re.compile(r"^\s*([•·▪◦●○■□➢►‣⁃*–—-]|\(?\d{1,3}[.)])\s")


@dataclass(frozen=True, slots=True)
class _Frame:
    """PDF points → 0..1 of the shown page: ``u = a x + b y + c``, ``v = d x + e y + f``."""

    a: float
    b: float
    c: float
    d: float
    e: float
    f: float

    @classmethod
    def of(cls, page: pdfium.PdfPage) -> _Frame:
        """The page's display matrix, measured at three points."""
        (x0, y0), (x1, y1), (x2, y2) = (_device(page, x, y) for x, y in _PROBES)
        step = _PROBE_STEP
        return cls((x1 - x0) / step, (x2 - x0) / step, x0, (y1 - y0) / step, (y2 - y0) / step, y0)

    def box(self, left: float, top: float, right: float, bottom: float) -> BBox:
        """A rectangle in PDF points as fractions of the shown page (inlined: this runs
        for every line of every born-digital page)."""
        u0, u1 = self.a * left + self.b * top + self.c, self.a * right + self.b * bottom + self.c
        v0, v1 = self.d * left + self.e * top + self.f, self.d * right + self.e * bottom + self.f
        if u0 > u1:
            u0, u1 = u1, u0
        if v0 > v1:
            v0, v1 = v1, v0
        return (
            round(u0 if 0.0 < u0 < 1.0 else (0.0 if u0 <= 0.0 else 1.0), BOX_DIGITS),
            round(v0 if 0.0 < v0 < 1.0 else (0.0 if v0 <= 0.0 else 1.0), BOX_DIGITS),
            round(u1 if 0.0 < u1 < 1.0 else (0.0 if u1 <= 0.0 else 1.0), BOX_DIGITS),
            round(v1 if 0.0 < v1 < 1.0 else (0.0 if v1 <= 0.0 else 1.0), BOX_DIGITS),
        )


def _device(page: pdfium.PdfPage, x: float, y: float) -> tuple[float, float]:
    """Where PDF point ``(x, y)`` is shown, as fractions of the page (may lie outside)."""
    dx, dy = ctypes.c_int(), ctypes.c_int()
    pdfium_c.FPDF_PageToDevice(
        page, 0, 0, _DEVICE, _DEVICE, 0, x, y, ctypes.byref(dx), ctypes.byref(dy)
    )
    return dx.value / _DEVICE, dy.value / _DEVICE


class _Rects:
    """Rectangles of a run of characters (the C buffers are made once a page)."""

    def __init__(self, textpage: pdfium.PdfTextPage, frame: _Frame) -> None:
        self.textpage = getattr(textpage, "raw", textpage)  # the bare handle: no conversion a call
        self.frame = frame
        self.edges = (ctypes.c_double(), ctypes.c_double(), ctypes.c_double(), ctypes.c_double())
        self.refs = tuple(ctypes.byref(edge) for edge in self.edges)

    def box(self, first: int, last: int) -> BBox | None:
        """The union of the rectangles of characters ``first..last``, on the shown page."""
        count = pdfium_c.FPDFText_CountRects(self.textpage, first, last - first + 1)
        left = bottom = math.inf
        right = top = -math.inf
        l_, t_, r_, b_ = self.edges
        for index in range(count):
            if pdfium_c.FPDFText_GetRect(self.textpage, index, *self.refs):
                left = l_.value if l_.value < left else left
                right = r_.value if r_.value > right else right
                bottom = b_.value if b_.value < bottom else bottom
                top = t_.value if t_.value > top else top
        return self.frame.box(left, top, right, bottom) if left <= right else None


def text_blocks(
    page: pdfium.PdfPage,
    textpage: pdfium.PdfTextPage,
    kept: Sequence[str | None],
    breaks: set[int],
    line_ends: Sequence[LineEnds],
    clean: Callable[[str], str],
) -> tuple[Block, ...]:
    """The blocks of a page's text lines: ``kept`` holds each line as the text keeps it
    (``None``: left out), ``breaks`` the lines a paragraph ends after, ``line_ends`` the
    non-blank lines' first and last characters, ``clean`` what the text's clean-up does to
    a line."""
    rects = _Rects(textpage, _Frame.of(page))
    boxes = {end[0]: rects.box(min(end[3:]), max(end[3:])) for end in line_ends}
    paragraphs: list[list[Line]] = [[]]
    for i, line in enumerate(kept):
        if line is None:
            continue
        text = clean(line)
        if text.strip():
            paragraphs[-1].append(Line(text, boxes.get(i)))
        if (i in breaks or not text.strip()) and paragraphs[-1]:
            paragraphs.append([])
    return tuple(_block(p) for p in paragraphs if p)


def _block(lines: list[Line]) -> Block:
    text = "\n".join(line.text for line in lines)
    label = BlockLabel.LIST_ITEM if _LIST_MARKER.match(text) else BlockLabel.TEXT
    return Block(label, text, union_box(line.bbox for line in lines), None, tuple(lines))
