"""A walk over a page's objects: image coverage, text painted under a covering image, and
text drawn in fonts the PDF does not embed.

``census_objects`` runs in a render worker on an open pypdfium2 page. Its result feeds the
text-layer signals (``textlayer.py``) and the check for text whose extraction depends on the
fonts installed on the machine (``fontdeps.py``).
"""

from __future__ import annotations

import ctypes
import itertools
import math
from dataclasses import dataclass, field
from typing import Any

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

#: Pages with more objects are walked at both ends only (scan images and OCR layers sit
#: first or last); it bounds the cost on vector-heavy pages.
MAX_OBJECTS_WALKED = 2000
#: An image covering this share of the page makes the page a scan (or a picture of one).
SCAN_COVERAGE = 0.60
#: Characters sampled to measure the hidden share.
HIDDEN_SAMPLES = 96
#: PDFium's text page skips a text object narrower than this (``kSizeEpsilon``): one whose
#: only glyph has no outline in the font face it found.
ZERO_WIDTH = 0.01
_INVISIBLE_MODES = frozenset({3, 7})
_FORM_DEPTH = 2

_Box = tuple[float, float, float, float]
_Matrix = tuple[float, float, float, float, float, float]
_IDENTITY: _Matrix = (1.0, 0.0, 0.0, 1.0, 0.0, 0.0)


@dataclass(slots=True)
class PageCensus:
    """What a walk over the page's objects found, in painting order."""

    page_box: _Box
    image_area: float = 0.0
    order: int = 0
    #: Painting order of the last image covering the page, -1 if none.
    cover_order: int = -1
    #: Resolution of the finest image covering the page, pixels per inch (0: no cover).
    scan_dpi: float = 0.0
    #: Address -> painting order of every text object, filled only when a cover exists.
    text_order: dict[int, int] = field(default_factory=dict)
    #: Text objects in a font the PDF does not embed: object address -> font address.
    loose_text: dict[int, int] = field(default_factory=dict)
    #: Those of them PDFium measured zero wide (it leaves them out of the text page).
    unmeasured: set[int] = field(default_factory=set)
    #: Font address -> whether the PDF embeds it (Type 3 fonts count as embedded).
    embedded: dict[int, bool] = field(default_factory=dict)

    @property
    def image_coverage(self) -> float:
        """Share of the page area under image objects (0..1)."""
        left, bottom, right, top = self.page_box
        return min(1.0, self.image_area / max(1e-6, (right - left) * (top - bottom)))


def address(handle: Any) -> int:
    """The address behind a pdfium handle, to compare handles and key dictionaries."""
    return ctypes.cast(handle, ctypes.c_void_p).value or 0


def census_objects(page: pdfium.PdfPage) -> PageCensus:
    """Measure image coverage and note text in fonts not embedded; when an image covers
    the page, note text painted before it."""
    left, bottom, right, top = page.get_bbox()
    census = PageCensus(page_box=(left, bottom, right, top))
    _walk_page(page, census, record_text=False)
    if census.cover_order >= 0:
        census.order = 0
        _walk_page(page, census, record_text=True)
    return census


def _walk_page(page: pdfium.PdfPage, census: PageCensus, *, record_text: bool) -> None:
    count = pdfium_c.FPDFPage_CountObjects(page)
    half = MAX_OBJECTS_WALKED // 2
    indexes = (
        range(count)
        if count <= MAX_OBJECTS_WALKED
        else itertools.chain(range(half), range(count - half, count))
    )
    for index in indexes:
        obj = pdfium_c.FPDFPage_GetObject(page, index)
        _visit(obj, census, _IDENTITY, 0, record_text)


def _visit(obj: object, census: PageCensus, matrix: _Matrix, depth: int, record_text: bool) -> None:
    census.order += 1
    kind = pdfium_c.FPDFPageObj_GetType(obj)
    if kind == pdfium_c.FPDF_PAGEOBJ_TEXT:
        if record_text:
            census.text_order[address(obj)] = census.order
        else:
            _note_font(obj, census)
    elif kind == pdfium_c.FPDF_PAGEOBJ_IMAGE:
        if not record_text:
            _add_image(obj, census, matrix)
    elif kind == pdfium_c.FPDF_PAGEOBJ_FORM and depth < _FORM_DEPTH:
        inner = _compose(_object_matrix(obj), matrix)
        for index in range(pdfium_c.FPDFFormObj_CountObjects(obj)):
            child = pdfium_c.FPDFFormObj_GetObject(obj, index)
            _visit(child, census, inner, depth + 1, record_text)


def _note_font(obj: object, census: PageCensus) -> None:
    """Remember a text object whose font is not embedded, and whether it has a width."""
    font = pdfium_c.FPDFTextObj_GetFont(obj)
    key = address(font)
    embedded = census.embedded.get(key)
    if embedded is None:
        embedded = census.embedded[key] = pdfium_c.FPDFFont_GetIsEmbedded(font) == 1
    if embedded:
        return
    here = address(obj)
    census.loose_text[here] = key
    left, bottom, right, top = (ctypes.c_float() for _ in range(4))
    if pdfium_c.FPDFPageObj_GetBounds(obj, left, bottom, right, top) and (
        abs(right.value - left.value) < ZERO_WIDTH
    ):
        census.unmeasured.add(here)


def _add_image(obj: object, census: PageCensus, matrix: _Matrix) -> None:
    """Add the image's area on the page; remember it when it covers the page."""
    left, bottom, right, top = (ctypes.c_float() for _ in range(4))
    if not pdfium_c.FPDFPageObj_GetBounds(obj, left, bottom, right, top):
        return
    box = _transform_box((left.value, bottom.value, right.value, top.value), matrix)
    area = _clipped_area(box, census.page_box)
    census.image_area += area
    page_left, page_bottom, page_right, page_top = census.page_box
    if area >= SCAN_COVERAGE * (page_right - page_left) * (page_top - page_bottom):
        census.cover_order = census.order
        census.scan_dpi = max(census.scan_dpi, _image_dpi(obj, matrix))


def _image_dpi(obj: object, matrix: _Matrix) -> float:
    """Pixels per inch of an image object as placed on the page: its pixels over the
    sides of the unit square its matrix maps (a turned or skewed scan measures true)."""
    width, height = ctypes.c_uint(), ctypes.c_uint()
    if not pdfium_c.FPDFImageObj_GetImagePixelSize(obj, width, height):
        return 0.0
    a, b, c, d, _, _ = _compose(_object_matrix(obj), matrix)
    across, down = math.hypot(a, b) / 72, math.hypot(c, d) / 72
    if across <= 0 or down <= 0:
        return 0.0
    return max(width.value / across, height.value / down)


def hidden_share(
    textpage: pdfium.PdfTextPage, census: PageCensus, skipped: frozenset[int] = frozenset()
) -> float:
    """Share of sampled letters and digits that are invisible or under a covering image.

    Punctuation is left out: drawing programs paint dot leaders and rules as invisible text.
    Characters in ``skipped`` are left out. On a page with text in fonts not embedded, the
    samples are taken among the characters drawn by a page object only: the characters
    PDFium generates (spaces, line ends) around text it could not place vary with the
    machine's fonts, and must not move the samples.
    """
    count = textpage.count_chars()
    if census.loose_text:
        candidates = [
            i
            for i in range(count)
            if i not in skipped and pdfium_c.FPDFText_GetTextObject(textpage, i)
        ]
    else:
        candidates = list(range(count))
    seen = hidden = 0
    for index in candidates[:: max(1, len(candidates) // HIDDEN_SAMPLES)]:
        obj = pdfium_c.FPDFText_GetTextObject(textpage, index)
        if not obj or not _is_alphanumeric(pdfium_c.FPDFText_GetUnicode(textpage, index)):
            continue  # generated spaces and line breaks have no object
        seen += 1
        order = census.text_order.get(address(obj), -1)
        if pdfium_c.FPDFTextObj_GetTextRenderMode(obj) in _INVISIBLE_MODES or (
            0 <= order < census.cover_order
        ):
            hidden += 1
    return hidden / seen if seen else 0.0


def _is_alphanumeric(code: int) -> bool:
    return code < 0x110000 and chr(code).isalnum()


def _object_matrix(obj: object) -> _Matrix:
    matrix = pdfium_c.FS_MATRIX()
    if not pdfium_c.FPDFPageObj_GetMatrix(obj, matrix):
        return _IDENTITY
    return (matrix.a, matrix.b, matrix.c, matrix.d, matrix.e, matrix.f)


def _compose(inner: _Matrix, outer: _Matrix) -> _Matrix:
    """The matrix applying ``inner`` then ``outer`` (PDF row-vector convention)."""
    a, b, c, d, e, f = inner
    a2, b2, c2, d2, e2, f2 = outer
    return (
        a * a2 + b * c2,
        a * b2 + b * d2,
        c * a2 + d * c2,
        c * b2 + d * d2,
        e * a2 + f * c2 + e2,
        e * b2 + f * d2 + f2,
    )


def _transform_box(box: _Box, matrix: _Matrix) -> _Box:
    if matrix == _IDENTITY:
        return box
    a, b, c, d, e, f = matrix
    corners = [(x, y) for x in (box[0], box[2]) for y in (box[1], box[3])]
    xs = [a * x + c * y + e for x, y in corners]
    ys = [b * x + d * y + f for x, y in corners]
    return min(xs), min(ys), max(xs), max(ys)


def _clipped_area(box: _Box, page: _Box) -> float:
    width = min(box[2], page[2]) - max(box[0], page[0])
    height = min(box[3], page[3]) - max(box[1], page[1])
    return max(0.0, width) * max(0.0, height)
