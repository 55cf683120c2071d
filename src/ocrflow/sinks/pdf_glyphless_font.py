"""The glyph-less font of the invisible text layer: a Type0 font whose CIDs are UTF-16
code units, every one mapped to one empty 0.5 em glyph, and a ``ToUnicode`` map that
reads each CID back as itself. Any script can be written with it, and no glyph program of
ours can ever show through (``pdf_text_layer.py`` draws the words with it)."""

from __future__ import annotations

import base64
import functools
import zlib

import pikepdf

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
ADVANCE = 0.5
ASCENT = 0.5
DESCENT = 0.15
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
        FontBBox=pikepdf.Array([0, round(-DESCENT * 1000), 500, round(ASCENT * 1000)]),
        ItalicAngle=0,
        Ascent=round(ASCENT * 1000),
        Descent=round(-DESCENT * 1000),
        CapHeight=round(ASCENT * 1000),
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
        DW=int(ADVANCE * 1000),
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
