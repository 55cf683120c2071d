"""Native text-layer extraction and a quality score that rejects garbage layers.

``extract_text_layer`` runs in a render worker on an open pypdfium2 page and returns the
text plus the cheap signals the scorer needs. ``score_text_layer`` is a pure function of
that value, so the policy is unit-tested without PDFs. Thresholds were set by measuring the
shared corpus (``bench/bench_textlayer.py``); each says why next to it.
"""

from __future__ import annotations

import ctypes
import itertools
import re
import statistics
from dataclasses import dataclass, field

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from ocrflow.errors import RenderError
from ocrflow.render.textstats import TextStats, measure_ocr_noise, measure_text

# --- policy ------------------------------------------------------------------------------

#: Fewer visible characters say nothing about the page: a page number or running head
#: alone, while the content may be an image or text drawn as outlines.
MIN_CHARS = 24
#: A born-digital layer is used from this score up. Every accepted page of the corpus
#: scores 0.877 or more (1st percentile 0.91); broken layers fall below 0.5.
MIN_SCORE = 0.70
#: A layer hidden over a page-sized image is another program's OCR. It is kept only when
#: it is nearly free of recognition noise (Tesseract's sandwich output is; OmniPage or
#: iText layers over old prints are not); otherwise our engine reads the page again.
MIN_SCORE_OCR_LAYER = 0.90
#: Each percent of noisy tokens (``measure_ocr_noise``) costs this many percent of score:
#: Tesseract on a clean scan has 0.4% noise, the OmniPage/old-print layers 2.4-27%.
OCR_NOISE_WEIGHT = 5.0
#: An image covering this share of the page makes the page a scan (or a picture of one).
SCAN_COVERAGE = 0.60
#: This share of the text being invisible (render mode 3/7, or painted under a page-sized
#: image) makes the layer hidden.
HIDDEN_SHARE = 0.25
#: Text this short on a page mostly covered by images misses what the images hold.
SPARSE_TEXT = 200
SPARSE_IMAGE_COVERAGE = 0.50

# Limits past which a defect is named in ``TextQuality.reasons``.
MAX_UNMAPPED = 0.03  # Thai PUA tone marks (6%) and TeX symbol fonts without maps fail
MAX_MOJIBAKE = 0.25  # Icelandic 0.17-0.23, French 0.14, German 0.10; Cyrillic as Latin-1 0.3+
MAX_MOJIBAKE_WORDS = 2  # a running head in broken Cyrillic ("ÏÐÅÄÌÅÒÍÛÉ ÓÊÀÇÀÒÅËÜ") is 2
MAX_LETTER_SPACED = 0.25  # lone-letter runs: math variables reach 0.05, spaced text 0.9
MAX_MIXED_SCRIPT = 0.08  # broken conjunct maps (XeTeX Devanagari) reach 0.25-0.6
MIN_WORDLIKE = 0.78  # every good corpus page (tables, code, chemistry) >= 0.865; garbage 0.3-0.6
MIN_LATIN_COMMON = 0.36  # natural text 0.46-0.6; 21 of 25 Caesar shifts of English below


@dataclass(frozen=True, slots=True)
class TextLayer:
    """The native text of one page and the signals needed to judge it.

    ``text``: reading order as pdfium gives it, "\\n" line ends, a blank line at large
    vertical gaps, control characters removed. ``char_count``: its non-whitespace
    characters. ``control_chars``: control characters removed (glyphs that a font without a
    Unicode map sends to code points 0-31). ``image_coverage``: share of the page area under
    image objects (0..1). ``hidden_share``: share of the characters a reader cannot see
    (render mode 3 or 7, or painted before an image covering the page).
    """

    text: str
    char_count: int
    control_chars: int = 0
    image_coverage: float = 0.0
    hidden_share: float = 0.0


@dataclass(frozen=True, slots=True)
class TextQuality:
    """Whether a text layer may replace OCR. ``reasons`` names the defects found."""

    score: float
    ok: bool
    reasons: tuple[str, ...] = ()


# --- scoring -----------------------------------------------------------------------------


def score_text_layer(
    layer: TextLayer, *, min_score_ocr_layer: float = MIN_SCORE_OCR_LAYER
) -> TextQuality:
    """Score ``layer`` in 0..1 and decide whether it may replace OCR for its page.

    ``min_score_ocr_layer`` is the bar for an OCR layer hidden over a scan; above 1.0 such
    layers are never used.
    """
    if layer.char_count < MIN_CHARS:
        return TextQuality(score=0.0, ok=False, reasons=("too_short",))
    stats = measure_text(layer.text, extra_unmapped=layer.control_chars)
    score, reasons = _score_stats(stats)
    needed = MIN_SCORE
    if layer.hidden_share >= HIDDEN_SHARE:
        if layer.image_coverage < SCAN_COVERAGE:
            reasons.append("invisible_text")
        else:
            score *= _ocr_layer_factor(layer.text, stats)
            needed = min_score_ocr_layer
            reasons.append("ocr_layer_over_scan")
    elif layer.image_coverage >= SPARSE_IMAGE_COVERAGE and layer.char_count < SPARSE_TEXT:
        reasons.append("sparse_text_over_image")
    ok = score >= needed and not _is_blocking(reasons)
    if score < needed and not _is_blocking(reasons):
        reasons.append("low_score")
    return TextQuality(score=round(score, 3), ok=ok, reasons=tuple(reasons) if not ok else ())


def _ocr_layer_factor(text: str, stats: TextStats) -> float:
    """Penalty for another program's OCR: its recognition noise, and a lack of letters.

    An engine run with the wrong language on, say, a Chinese scan keeps only digits and
    stray Latin letters; a real page of text is mostly letters.
    """
    noise = max(0.0, 1.0 - OCR_NOISE_WEIGHT * measure_ocr_noise(text))
    return noise * min(1.0, stats.letters / 0.5)


def _is_blocking(reasons: list[str]) -> bool:
    # "ocr_layer_over_scan" only raises the bar; every other reason rejects on its own.
    return any(reason != "ocr_layer_over_scan" for reason in reasons)


def _score_stats(stats: TextStats) -> tuple[float, list[str]]:
    """Combine the defect shares into one score; name those past their limit."""
    checks = (
        ("unmapped_glyphs", stats.unmapped > MAX_UNMAPPED, 1.0 - 8.0 * stats.unmapped),
        (
            "mojibake",
            stats.mojibake > MAX_MOJIBAKE or stats.mojibake_words >= MAX_MOJIBAKE_WORDS,
            1.0 - (stats.mojibake - 0.2) / 0.2,
        ),
        ("letter_spaced", stats.letter_spaced > MAX_LETTER_SPACED, 1.0 - stats.letter_spaced),
        ("mixed_scripts", stats.mixed_script > MAX_MIXED_SCRIPT, 1.0 - 2.0 * stats.mixed_script),
        ("low_wordlikeness", stats.wordlike < MIN_WORDLIKE, 1.0),
        ("shifted_glyphs", stats.latin_common < MIN_LATIN_COMMON, (stats.latin_common - 0.3) / 0.1),
    )
    # Clean prose has over 0.95 clean tokens, code or formula pages about 0.85.
    score = min(1.0, max(0.0, (stats.wordlike - 0.5) / 0.4))
    reasons: list[str] = []
    for name, failed, factor in checks:
        # A named defect at least halves the score, however mild its measure looks.
        score *= min(1.0, max(0.0, factor), 0.5 if failed else 1.0)
        if failed:
            reasons.append(name)
    return score, reasons


# --- extraction --------------------------------------------------------------------------

#: Pages with more objects are walked at both ends only (scan images and OCR layers sit
#: first or last); it bounds the cost on vector-heavy pages.
MAX_OBJECTS_WALKED = 2000
#: Characters sampled to measure the hidden share.
HIDDEN_SAMPLES = 96
_INVISIBLE_MODES = frozenset({3, 7})
_FORM_DEPTH = 2
_WHITESPACE = re.compile(r"\s+")
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")

_Box = tuple[float, float, float, float]
_Matrix = tuple[float, float, float, float, float, float]
_IDENTITY: _Matrix = (1.0, 0.0, 0.0, 1.0, 0.0, 0.0)


def extract_text_layer(page: pdfium.PdfPage) -> TextLayer:
    """Read the native text of ``page`` and the signals ``score_text_layer`` needs.

    Raises ``RenderError`` when pdfium cannot load the page's text.
    """
    census = _census_objects(page)
    try:
        textpage = page.get_textpage()
    except pdfium.PdfiumError as exc:
        raise RenderError(f"cannot read the text layer: {exc}") from exc
    try:
        raw = _read_text(textpage)
        hidden = _hidden_share(textpage, census) if raw else 0.0
    finally:
        textpage.close()
    text, controls = _CONTROL.subn("", raw.replace("\ufffe", "").replace("\r", "\n"))
    return TextLayer(
        text=text,
        char_count=len(_WHITESPACE.sub("", text)),
        control_chars=controls,
        image_coverage=census.image_coverage,
        hidden_share=hidden,
    )


def _read_text(textpage: pdfium.PdfTextPage) -> str:
    """All text of the page, lines joined by "\\n", a blank line at large vertical gaps.

    pdfium writes U+FFFE where it joined a word hyphenated across lines; the caller drops it.
    """
    if textpage.count_chars() <= 0:
        return ""
    lines = textpage.get_text_range().split("\r\n")
    breaks = _paragraph_breaks(textpage, lines) if len(lines) > 2 else set()
    ends = ("\n\n" if i in breaks else "\n" for i in range(len(lines)))
    return "".join(line.rstrip() + end for line, end in zip(lines, ends, strict=True))[:-1]


def _paragraph_breaks(textpage: pdfium.PdfTextPage, lines: list[str]) -> set[int]:
    """Lines followed by a gap taller than a line, or by a jump up (a new column)."""
    boxes = _line_boxes(textpage, lines)
    heights = [top - bottom for _, top, bottom in boxes if top > bottom]
    if not heights:
        return set()
    height = statistics.median(heights)
    breaks = set()
    for (i, _, prev_bottom), (_, next_top, _) in itertools.pairwise(boxes):
        gap = prev_bottom - next_top
        if gap > 0.9 * height or gap < -3.0 * height:
            breaks.add(i)
    return breaks


def _line_boxes(textpage: pdfium.PdfTextPage, lines: list[str]) -> list[tuple[int, float, float]]:
    """(line index, top of its first character, bottom of its last) for non-blank lines.

    Loose boxes (font ascent to descent) keep the height steady across letters. pdfium may
    put two printed lines in one text line, hence the last character for the bottom.
    """
    rect = pdfium_c.FS_RECTF()
    boxes: list[tuple[int, float, float]] = []
    offset = 0
    for i, line in enumerate(lines):
        first = len(line) - len(line.lstrip())
        last = len(line.rstrip()) - 1
        if last >= first:
            top = _char_box(textpage, offset + first, rect)
            bottom = _char_box(textpage, offset + last, rect)
            if top is not None and bottom is not None:
                boxes.append((i, top[0], bottom[1]))
        offset += len(line) + 2
    return boxes


def _char_box(
    textpage: pdfium.PdfTextPage, text_index: int, rect: pdfium_c.FS_RECTF
) -> tuple[float, float] | None:
    """(top, bottom) of the loose box of the character at ``text_index``, if it has one."""
    char = pdfium_c.FPDFText_GetCharIndexFromTextIndex(textpage, text_index)
    if char < 0 or not pdfium_c.FPDFText_GetLooseCharBox(textpage, char, rect):
        return None
    return rect.top, rect.bottom


# --- page objects ------------------------------------------------------------------------


@dataclass(slots=True)
class _Census:
    """What a walk over the page's objects found, in painting order."""

    page_box: _Box
    image_area: float = 0.0
    order: int = 0
    #: Painting order of the last image covering the page, -1 if none.
    cover_order: int = -1
    #: Address -> painting order of every text object, filled only when a cover exists.
    text_order: dict[int, int] = field(default_factory=dict)

    @property
    def image_coverage(self) -> float:
        left, bottom, right, top = self.page_box
        return min(1.0, self.image_area / max(1e-6, (right - left) * (top - bottom)))


def _census_objects(page: pdfium.PdfPage) -> _Census:
    """Measure image coverage; when an image covers the page, note text painted before it."""
    left, bottom, right, top = page.get_bbox()
    census = _Census(page_box=(left, bottom, right, top))
    _walk_page(page, census, record_text=False)
    if census.cover_order >= 0:
        census.order = 0
        _walk_page(page, census, record_text=True)
    return census


def _walk_page(page: pdfium.PdfPage, census: _Census, *, record_text: bool) -> None:
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


def _visit(obj: object, census: _Census, matrix: _Matrix, depth: int, record_text: bool) -> None:
    census.order += 1
    kind = pdfium_c.FPDFPageObj_GetType(obj)
    if kind == pdfium_c.FPDF_PAGEOBJ_TEXT:
        if record_text:
            census.text_order[ctypes.cast(obj, ctypes.c_void_p).value or 0] = census.order
    elif kind == pdfium_c.FPDF_PAGEOBJ_IMAGE:
        if not record_text:
            _add_image(obj, census, matrix)
    elif kind == pdfium_c.FPDF_PAGEOBJ_FORM and depth < _FORM_DEPTH:
        inner = _compose(_object_matrix(obj), matrix)
        for index in range(pdfium_c.FPDFFormObj_CountObjects(obj)):
            child = pdfium_c.FPDFFormObj_GetObject(obj, index)
            _visit(child, census, inner, depth + 1, record_text)


def _add_image(obj: object, census: _Census, matrix: _Matrix) -> None:
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


def _hidden_share(textpage: pdfium.PdfTextPage, census: _Census) -> float:
    """Share of sampled letters and digits that are invisible or under a covering image.

    Punctuation is left out: drawing programs paint dot leaders and rules as invisible text.
    """
    count = textpage.count_chars()
    step = max(1, count // HIDDEN_SAMPLES)
    seen = hidden = 0
    for index in range(0, count, step):
        obj = pdfium_c.FPDFText_GetTextObject(textpage, index)
        if not obj or not _is_alphanumeric(pdfium_c.FPDFText_GetUnicode(textpage, index)):
            continue  # generated spaces and line breaks have no object
        seen += 1
        order = census.text_order.get(ctypes.cast(obj, ctypes.c_void_p).value or 0, -1)
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
