"""The invisible text layer of a searchable PDF: where each word goes and how it is drawn.

Each OCR'd page gets one content stream of its own, appended after the page's content
(which is wrapped in ``q``/``Q`` so a graphics state it leaves behind cannot move our
text). Words are drawn in text render mode 3 (neither filled nor stroked: invisible but
selectable and searchable, as Tesseract and OCRmyPDF draw them) in a glyph-less font
(``pdf_glyphless_font.py``). Each word is stretched horizontally (``Tz``) to the width of
its box, at one font size a block (from its line spacing) on one baseline a line, with a
space across the gap to the next word, so a search highlight covers the printed word and
text extractors find the page's words, lines and columns as the Markdown has them
(``pdf_text_sizes.py``; blocks that extractors would run together are kept apart:
``pdf_text_gutters.py``; a table's rows and a block in a gutter: ``pdf_text_order.py``).

Geometry: boxes are fractions of the page as rendered (``/Rotate`` applied, origin top
left), and the engine may have turned the page further (``Page.rotation``) to read it.
Words are laid out upright in the *reading frame* (the crop box turned by ``/Rotate``
plus the engine's turn) and one ``cm`` maps that frame onto PDF user space, so rotated
pages get rotated text that still reads in the right direction.
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import pikepdf

from ocrflow.document.model import Page
from ocrflow.document.words import block_lines, line_words, plain_lines
from ocrflow.sinks.pdf_glyphless_font import ADVANCE, ASCENT, DESCENT, GlyphlessFont
from ocrflow.sinks.pdf_text_gutters import kept_apart
from ocrflow.sinks.pdf_text_order import (
    drawn_by_rows,
    out_of_gutters,
    side_by_side,
    table_rows,
)
from ocrflow.sinks.pdf_text_sizes import line_sizes, line_spans
from ocrflow.types import BBox, BlockLabel, Line, Route, Word, unturn_box

#: Lines that have text but no box are stacked from the top of the page at this height
#: (a fraction of the page) or less: searchable, though highlights land at the wrong place.
_LOOSE_LINE = 0.03
_CONTROL = {c: None for c in range(32)} | {0x7F: None}
#: The least and the widest gap drawn between two words of a line, in font sizes.
_WORD_GAP, _WIDEST_GAP = 0.1, 0.5


@dataclass(frozen=True, slots=True)
class PageFrame:
    """A PDF page's geometry: its crop box ``(x0, y0, x1, y1)`` in user space (before
    ``/Rotate``) and its ``/Rotate`` (0, 90, 180 or 270)."""

    box: tuple[float, float, float, float]
    rotate: int = 0

    @classmethod
    def of(cls, page: pikepdf.Page) -> PageFrame:
        """The frame PDFium renders: the crop box (clipped to the media box), turned by
        ``/Rotate``."""
        media = _rect(page.obj.get("/MediaBox")) or (0.0, 0.0, 612.0, 792.0)
        crop = _rect(page.obj.get("/CropBox")) or media
        box = (
            max(crop[0], media[0]),
            max(crop[1], media[1]),
            min(crop[2], media[2]),
            min(crop[3], media[3]),
        )
        if box[2] <= box[0] or box[3] <= box[1]:
            box = media
        rotate = int(page.obj.get("/Rotate", 0) or 0) % 360
        return cls(box, rotate - rotate % 90)


def _rect(value: Any) -> tuple[float, float, float, float] | None:
    # A pikepdf array of four numbers; anything else (a broken /MediaBox) is no box.
    try:
        x0, y0, x1, y1 = (float(v) for v in value)
    except (TypeError, ValueError):
        return None
    return (min(x0, x1), min(y0, y1), max(x0, x1), max(y0, y1))


def gets_text_layer(page: Page) -> bool:
    """Whether a page was read by an engine (its words go under the page image); a page
    read from its own text layer, blank or not converted stays as it is."""
    if page.route is Route.ENGINE:
        return True
    return page.route is Route.FALLBACK and page.attributes.get("fallback") == "engine"


class PlacedWord(NamedTuple):
    """A word in the reading frame, with the block and line it belongs to (indexes in
    reading order; words of no block share the index -1)."""

    text: str
    bbox: BBox
    block: int
    line: int


def reading_words(page: Page) -> list[PlacedWord]:
    """The page's words with their boxes in the reading frame (the page turned by
    ``page.rotation``, fractions 0..1, origin top left), in reading order."""
    turn = (360 - page.rotation % 360) % 360  # unturning by -r turns by r

    def turned(box: BBox | None) -> BBox | None:
        return None if box is None else unturn_box(box, turn)

    placed: list[PlacedWord] = []
    loose: list[str] = []
    line_number = 0
    for number, block in enumerate(page.blocks):
        for line in block_lines(block):
            words = tuple(Word(w.text, turned(w.bbox), w.confidence) for w in line.words)
            upright = Line(line.text, turned(line.bbox), line.confidence, words)
            if upright.bbox is None and not any(w.bbox for w in words):
                loose.append(line.text)
                continue
            placed.extend(
                PlacedWord(w.text, w.bbox, number, line_number)
                for w in line_words(upright)
                if w.bbox is not None
            )
            line_number += 1
    if not page.blocks:
        loose = plain_lines(page.markdown)
    placed.extend(_stacked(loose, line_number))
    return placed


def _stacked(lines: Sequence[str], first_line: int) -> Iterator[PlacedWord]:
    if not lines:
        return
    step = min(_LOOSE_LINE, 0.96 / len(lines))
    for row, text in enumerate(lines):
        top = 0.02 + row * step
        line = Line(text, (0.02, top, 0.98, top + step))
        yield from (
            PlacedWord(w.text, w.bbox, -1, first_line + row)
            for w in line_words(line)
            if w.bbox is not None
        )


def frame_matrix(frame: PageFrame, turn: int) -> tuple[float, float, float, float, float, float]:
    """The ``cm`` that maps the reading frame, in points with the origin at its bottom
    left, onto user space: the crop box turned clockwise by ``/Rotate`` plus ``turn``."""
    x0, y0, x1, y1 = frame.box
    width, height = x1 - x0, y1 - y0
    total = (frame.rotate + turn) % 360
    if total == 90:
        return (0, 1, -1, 0, x0 + width, y0)
    if total == 180:
        return (-1, 0, 0, -1, x0 + width, y0 + height)
    if total == 270:
        return (0, -1, 1, 0, x0, y0 + height)
    return (1, 0, 0, 1, x0, y0)


def reading_size(frame: PageFrame, turn: int) -> tuple[float, float]:
    """The reading frame's width and height in points."""
    x0, y0, x1, y1 = frame.box
    if (frame.rotate + turn) % 180:
        return y1 - y0, x1 - x0
    return x1 - x0, y1 - y0


def text_layer(page: Page, frame: PageFrame, font: str, encode: Callable[[str], str]) -> bytes:
    """The content stream drawing ``page``'s words invisibly with font resource ``font``,
    each word's codes given by ``encode`` as hex, four digits a glyph (``b""`` when the
    page has no word to draw)."""
    words = reading_words(page)
    if not words:
        return b""
    width, height = reading_size(frame, page.rotation)
    if width <= 0 or height <= 0:  # a hostile file's page of no area: nowhere to draw
        return b""
    matrix = " ".join(_num(v) for v in frame_matrix(frame, page.rotation))
    lines = line_spans((word.line, word.block, word.bbox) for word in words)
    # Sized in the reading frame, where the words stand upright, however the page is shown:
    # a page read turned (a sideways scan, a /Rotate that does not match its scan) drawn
    # word by word at each word's own height came apart in pdftotext (CER 0.77 against the
    # Markdown on a sideways page; 0.000 sized by lines).
    sizes = line_sizes(lines, height, ASCENT + DESCENT)
    sizes, narrowed = kept_apart(lines, sizes, width, height)
    drawn = lines | {
        line: dataclasses.replace(lines[line], x0=x0, x1=x1) for line, (x0, x1) in narrowed.items()
    }
    tables = {i for i, block in enumerate(page.blocks) if block.label is BlockLabel.TABLE}
    tables = drawn_by_rows(drawn, tables) | side_by_side(drawn)
    middles, rows, sizes = table_rows(drawn, tables, sizes, (width, height))
    across = out_of_gutters(drawn, sizes, (width, height), ASCENT + DESCENT) | narrowed | rows

    def span(word: PlacedWord) -> tuple[float, float]:
        # Where the word is drawn across: spread along its line where that is drawn
        # narrower or wider than its box.
        u0, u1 = word.bbox[0], word.bbox[2]
        if word.line not in across:
            return u0, u1
        was, (x0, x1) = lines[word.line], across[word.line]
        if was.x1 <= was.x0:  # a line boxed with no width: drawn across its new span
            return x0, x1
        scale = (x1 - x0) / (was.x1 - was.x0)
        return x0 + (u0 - was.x0) * scale, x0 + (u1 - was.x0) * scale

    ops = [f"q {matrix} cm BT 3 Tr"]
    space = encode(" ")
    for word, after in zip(words, [*words[1:], None], strict=True):
        text, line = word.text, word.line
        u0, u1 = span(word)
        encoded = encode(text.translate(_CONTROL))
        size = sizes.get(line, (word.bbox[3] - word.bbox[1]) * height)
        if not encoded or size <= 0.05:
            continue
        if after is not None and after.line == line:
            u1 = _up_to(u0, u1, span(after)[0], size / width)
        if u1 <= u0:
            continue
        glyphs = len(encoded) // 4
        scale = 100 * (u1 - u0) * width / (glyphs * ADVANCE * size)
        # The font's box centred on the line's.
        baseline = (1 - middles.get(line, lines[line].middle)) * height - (
            ASCENT - DESCENT
        ) / 2 * size
        ops.append(
            f"/{font} {_num(size)} Tf {_num(scale)} Tz "
            f"1 0 0 1 {_num(u0 * width)} {_num(baseline)} Tm <{encoded}> Tj"
        )
        if after is not None and after.line == line:
            # A space drawn across the gap to the next word of the line: extractors
            # otherwise guess word breaks from gaps measured in font sizes, and ran words
            # together ("thefirst") where the type is set tight.
            gap = max(span(after)[0] - u1, 0.0) * width
            ops.append(f"{_num(max(100 * gap / (ADVANCE * size), 1.0))} Tz <{space}> Tj")
    if len(ops) == 1:
        return b""
    ops.append("ET Q")
    return "\n".join(ops).encode("ascii")


def _up_to(u0: float, u1: float, following: float, size: float) -> float:
    """Where a word from ``u0`` to ``u1`` ends, drawn before a word of its line starting at
    ``following`` (``size``: the font size, all in fractions of the frame's width)."""
    gap = (following - u1) / size
    if gap < _WORD_GAP:
        # A word boxed into the next (a comma touching it) ends short of it: poppler reads
        # no space between words drawn less than 0.03 sizes apart (",Mason").
        return max(following - _WORD_GAP * size, (u0 + u1) / 2)
    if gap > _WIDEST_GAP:
        # A line with a wide gap (a table's row as Tesseract reads it, a label and its
        # value) is drawn whole, its highlight running on into the gap: poppler cuts a line
        # at gaps over 0.7 sizes into blocks and reads them down the page, column by
        # column (a results table: CER 0.071 against the Markdown's 0.041), or a label
        # after the column beside it (a certificate's table: 0.041 against 0.033).
        return following - _WIDEST_GAP * size
    return u1


def _num(value: float) -> str:
    return f"{value:.3f}".rstrip("0").rstrip(".") or "0"


def add_text_layer(pdf_page: pikepdf.Page, page: Page, font: GlyphlessFont) -> bool:
    """Draw ``page``'s words under ``pdf_page``'s content; whether there were any. The
    page's own streams and resources stay (only a font is added to its resources)."""
    name = "OcrflowText"
    layer = text_layer(page, PageFrame.of(pdf_page), name, font.encode)
    if not layer:
        return False
    pdf = font.pdf
    pdf_page.add_resource(font.font, pikepdf.Name.Font, pikepdf.Name("/" + name))
    pdf_page.contents_add(pikepdf.Stream(pdf, b"q\n"), prepend=True)
    text = pikepdf.Stream(pdf, zlib.compress(b"\nQ\n" + layer, 6))
    text.Filter = pikepdf.Name.FlateDecode
    pdf_page.contents_add(text, prepend=False)
    return True
