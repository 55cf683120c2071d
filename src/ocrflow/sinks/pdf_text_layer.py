"""The invisible text layer of a searchable PDF: where each word goes and how it is drawn.

Each OCR'd page gets one content stream of its own, appended after the page's content
(which is wrapped in ``q``/``Q`` so a graphics state it leaves behind cannot move our
text). Words are drawn in text render mode 3 (neither filled nor stroked: invisible but
selectable and searchable, as Tesseract and OCRmyPDF draw them) in a glyph-less font: a
Type0 font whose CIDs are UTF-16 code units, every one mapped to one empty 0.5 em glyph,
and a ``ToUnicode`` map that reads each CID back as itself. Any script can be written with
it, and no glyph program of ours can ever show through. Each word is stretched
horizontally (``Tz``) to the width of its box, at one font size a block (from its line
spacing) on one baseline a line, with a space across the gap to the next word, so a
search highlight covers the printed word and text extractors find the page's words,
lines and columns (``pdf_text_sizes.py``; blocks that extractors would run together are
kept apart: ``pdf_text_gutters.py``).

Geometry: boxes are fractions of the page as rendered (``/Rotate`` applied, origin top
left), and the engine may have turned the page further (``Page.rotation``) to read it.
Words are laid out upright in the *reading frame* (the crop box turned by ``/Rotate``
plus the engine's turn) and one ``cm`` maps that frame onto PDF user space, so rotated
pages get rotated text that still reads in the right direction.
"""

from __future__ import annotations

import base64
import functools
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import pikepdf

from ocrflow.document.model import Page
from ocrflow.document.words import block_lines, line_words, plain_lines
from ocrflow.sinks.pdf_text_gutters import kept_apart
from ocrflow.sinks.pdf_text_sizes import line_sizes, line_spans
from ocrflow.types import BBox, Line, Route, Word, unturn_box

#: A TrueType program (made once with fontTools' FontBuilder, stored zlib-compressed):
#: ``.notdef`` and glyph 1, a plain box 500 units wide from descent -200 to ascent 800.
#: Embedding it keeps viewers from substituting (and complaining about) a missing font.
#: Glyph 1 has an outline, though render mode 3 never paints it: PDFium drops the
#: characters of an empty glyph from its text when the text runs vertically on the page.
_GLYPHLESS_TTF = (
    "eNqVkLtKA0EUhv/ZSeIFowRUklQriIhIAiIhhWChJE1AiFpZ6Cau2WKTXXLBpBFLS8EHsLH0EUQsLPIWWgjmAVawENY/s4"
    "mXYOMZzsz5zpw5889AAJjEOST0nd302vbT1iUglpk9KlcNF1PIkZnDasXunMiaeCc/kpOWaRynrYclxrf0jMVEeF6kGL/Q"
    "F61qsy08RhAXnCK2UzYQVXzX56rRdhFChDxO1mtG1UxcJ9bJz+S66zSa7pksAdoeeQV9rfSrm/2Dw5mNN0jZ63d7Td2ffq"
    "9+VnhSJ0poCIxnpO5nGQRqPNXppwmV0agm2NEwalJ4/IUwK/5pm7RBC6WB2rojJfpQ2dfdkj7LWag1hLjKK1W+r3z4gmjw"
    "vsGreW4uthATXlf2PuJBRQiZQbUYVqtuYyTeEJpgJhncxljDNFJ5u+NaBbPRyDm1ZtGstGyjjjxsdODCQgEmGhw5OKihiS"
    "K5ghb3DdT//L3fxn2hyZLTBj4BCmtShw=="
)
#: The glyph advance, and the font's ascent and descent as its descriptor states them
#: (em): what extractors take for a character's box. Less than 1 em high, so that a font
#: size as large as the line spacing asks for (``pdf_text_sizes.py``) still boxes each word
#: inside its line.
_ADVANCE = 0.5
_ASCENT = 0.5
_DESCENT = 0.15
_CMAP_HEAD = """/CIDInit /ProcSet findresource begin
12 dict begin
begincmap
/CIDSystemInfo << /Registry (Adobe) /Ordering (UCS) /Supplement 0 >> def
/CMapName /Adobe-Identity-UCS def
/CMapType 2 def
1 begincodespacerange
<0000> <FFFF>
endcodespacerange"""
_CMAP_TAIL = """endcmap
CMapName currentdict /CMap defineresource pop
end
end"""
#: The first of the codes given to characters beyond the BMP (high surrogates).
_SURROGATES = 0xD800
#: Lines that have text but no box are stacked from the top of the page at this height
#: (a fraction of the page) or less: searchable, though highlights land at the wrong place.
_LOOSE_LINE = 0.03
_CONTROL = {c: None for c in range(32)} | {0x7F: None}


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
    sizes = line_sizes(lines, height, _ASCENT + _DESCENT)
    sizes, narrowed = kept_apart(lines, sizes, width, height)

    def span(word: PlacedWord) -> tuple[float, float]:
        # Where the word is drawn across: squeezed along its line where that is narrowed.
        u0, u1 = word.bbox[0], word.bbox[2]
        if word.line not in narrowed:
            return u0, u1
        was, (x0, x1) = lines[word.line], narrowed[word.line]
        scale = (x1 - x0) / (was.x1 - was.x0)
        return x0 + (u0 - was.x0) * scale, x0 + (u1 - was.x0) * scale

    ops = [f"q {matrix} cm BT 3 Tr"]
    space = encode(" ")
    for word, after in zip(words, [*words[1:], None], strict=True):
        text, (_, v0, _, v1), line = word.text, word.bbox, word.line
        u0, u1 = span(word)
        encoded = encode(text.translate(_CONTROL))
        size = sizes.get(line, (v1 - v0) * height)
        if not encoded or size <= 0.05 or u1 <= u0:
            continue
        glyphs = len(encoded) // 4
        scale = 100 * (u1 - u0) * width / (glyphs * _ADVANCE * size)
        # The font's box centred on the line's.
        baseline = (1 - lines[line].middle) * height - (_ASCENT - _DESCENT) / 2 * size
        ops.append(
            f"/{font} {_num(size)} Tf {_num(scale)} Tz "
            f"1 0 0 1 {_num(u0 * width)} {_num(baseline)} Tm <{encoded}> Tj"
        )
        if after is not None and after.line == line:
            # A space drawn across the gap to the next word of the line: extractors
            # otherwise guess word breaks from gaps measured in font sizes, and ran words
            # together ("thefirst") where the type is set tight.
            gap = max(span(after)[0] - u1, 0.0) * width
            ops.append(f"{_num(max(100 * gap / (_ADVANCE * size), 1.0))} Tz <{space}> Tj")
    if len(ops) == 1:
        return b""
    ops.append("ET Q")
    return "\n".join(ops).encode("ascii")


def _num(value: float) -> str:
    return f"{value:.3f}".rstrip("0").rstrip(".") or "0"


@functools.cache
def _gid_map() -> bytes:
    """The CIDToGIDMap, compressed: every code shows glyph 1 (made once a process:
    compressing its 128 KiB costs a millisecond)."""
    return zlib.compress(b"\x00\x01" * 65536, 9)


class GlyphlessFont:
    """The glyph-less Type0 font of one PDF file (every page shares it) and the codes it
    gave out.

    A character of the Basic Multilingual Plane is its own code; a character beyond it
    (emoji, mathematical letters, CJK extension B) gets one of the 2,048 codes of the
    surrogate range, which never stand for text on their own, so it stays one glyph and
    reads back whole. ``finish`` writes the ``ToUnicode`` map once every page is drawn.
    """

    def __init__(self, pdf: pikepdf.Pdf) -> None:
        self.pdf = pdf
        self._beyond: dict[str, int] = {}
        self._to_unicode = pikepdf.Stream(pdf, b"")
        self.font = _font_object(pdf, pdf.make_indirect(self._to_unicode))

    def encode(self, text: str) -> str:
        """``text`` as hex codes, four digits a character."""
        codes = []
        for char in text:
            point = ord(char)
            if point > 0xFFFF:
                point = self._beyond.setdefault(char, _SURROGATES + len(self._beyond))
                if point >= _SURROGATES + 2048:  # out of codes: "unknown" it is
                    self._beyond.pop(char)
                    point = 0xFFFD
            elif _SURROGATES <= point < _SURROGATES + 2048:
                point = 0xFFFD  # a lone surrogate is no character
            codes.append(f"{point:04X}")
        return "".join(codes)

    def finish(self) -> None:
        """Write the ``ToUnicode`` map: each BMP code reads as itself, each code given to
        a character beyond the BMP as that character."""
        low, high = _SURROGATES >> 8, (_SURROGATES + 2048) >> 8
        ranges = [f"<{b:02X}00> <{b:02X}FF> <{b:02X}00>" for b in range(256) if not low <= b < high]
        chars = [
            f"<{code:04X}> <{char.encode('utf-16-be').hex().upper()}>"
            for char, code in self._beyond.items()
        ]
        body = [_CMAP_HEAD]
        # At most 100 entries a section (PDF 32000-1, 9.10.3).
        for start in range(0, len(ranges), 100):
            part = ranges[start : start + 100]
            body.append(f"{len(part)} beginbfrange\n" + "\n".join(part) + "\nendbfrange")
        for start in range(0, len(chars), 100):
            part = chars[start : start + 100]
            body.append(f"{len(part)} beginbfchar\n" + "\n".join(part) + "\nendbfchar")
        body.append(_CMAP_TAIL)
        data = zlib.compress("\n".join(body).encode("ascii"), 9)
        self._to_unicode.write(data, filter=pikepdf.Name.FlateDecode)


def _font_object(pdf: pikepdf.Pdf, to_unicode: pikepdf.Object) -> pikepdf.Object:
    packed = base64.b64decode(_GLYPHLESS_TTF)
    font_file = pikepdf.Stream(pdf, packed)  # zlib data: a FlateDecode stream as it is
    font_file.Filter = pikepdf.Name.FlateDecode
    font_file.Length1 = len(zlib.decompress(packed))
    descriptor = pikepdf.Dictionary(
        Type=pikepdf.Name.FontDescriptor,
        FontName=pikepdf.Name.GlyphLessFont,
        Flags=5,
        FontBBox=pikepdf.Array([0, round(-_DESCENT * 1000), 500, round(_ASCENT * 1000)]),
        ItalicAngle=0,
        Ascent=round(_ASCENT * 1000),
        Descent=round(-_DESCENT * 1000),
        CapHeight=round(_ASCENT * 1000),
        StemV=80,
        FontFile2=font_file,
    )
    gid_map = pikepdf.Stream(pdf, _gid_map())
    gid_map.Filter = pikepdf.Name.FlateDecode
    cid_font = pikepdf.Dictionary(
        Type=pikepdf.Name.Font,
        Subtype=pikepdf.Name.CIDFontType2,
        BaseFont=pikepdf.Name.GlyphLessFont,
        CIDSystemInfo=pikepdf.Dictionary(
            Registry=pikepdf.String("Adobe"), Ordering=pikepdf.String("Identity"), Supplement=0
        ),
        FontDescriptor=pdf.make_indirect(descriptor),
        DW=int(_ADVANCE * 1000),
        CIDToGIDMap=pdf.make_indirect(gid_map),
    )
    font = pikepdf.Dictionary(
        Type=pikepdf.Name.Font,
        Subtype=pikepdf.Name.Type0,
        BaseFont=pikepdf.Name.GlyphLessFont,
        Encoding=pikepdf.Name("/Identity-H"),
        DescendantFonts=pikepdf.Array([pdf.make_indirect(cid_font)]),
        ToUnicode=to_unicode,
    )
    return pdf.make_indirect(font)


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
