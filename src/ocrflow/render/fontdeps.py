"""Characters whose extraction depends on the fonts installed on the machine.

PDFium takes the Unicode of a font the PDF does not embed from the PDF itself (encoding,
CMap, ToUnicode), but measures each glyph in a face it finds on the machine: one of its
built-in Latin faces, or a system font (on Linux it scans ``/usr/share/fonts``,
``/usr/share/X11/fonts/Type1``, ``/usr/share/X11/fonts/TTF`` and ``/usr/local/share/fonts``;
fontconfig and its variables play no part). A text object holding one glyph that the face
lacks has no width, and PDFium's text page leaves it out. So a Chinese OCR layer drawn one
character an object in a non-embedded SimSun comes out whole where a CJK font is installed
and without its Chinese elsewhere; where the CJK face has no Latin glyphs (Droid Sans
Fallback), its lone digits go missing instead.

The rule that gives the same text on every machine, for a character alone in its text
object, in a font the PDF does not embed:

- a standard Latin font (Helvetica, Arial, Times, Courier and their aliases) is drawn with
  a Latin face everywhere: its character is kept when PDFium's built-in faces have it;
- Symbol and ZapfDingbats are drawn with PDFium's own faces everywhere: always kept;
- any other font may get a CJK face that lacks Latin letters, or a Latin face that lacks
  CJK: its lone characters are kept only if the font shows no sign of needing another face
  on this page, that is no lone character outside the built-in repertoire and no object
  PDFium could not measure (a glyph the face lacks; also a lone space, which costs a
  non-standard Latin font drawn a glyph an object its lone characters: the same loss on
  every machine).

Text objects of two glyphs or more always have a width, so PDFium always reads them.
"""

from __future__ import annotations

import ctypes
import re
from collections import defaultdict

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from ocrflow.render.pageobjects import PageCensus, address

#: Characters PDFium's built-in faces draw besides Windows-1252 (measured with PDFium 7x:
#: a lone glyph of every code point up to U+22FF in a non-embedded font, no system fonts).
BUILTIN_EXTRA = frozenset("ıŁłμ⁄−∕∙⋯")
#: Fonts PDFium maps to its standard Latin faces (``kAltFontNames``), and to its symbol
#: faces; the name is matched without a subset prefix and without spaces.
_LATIN_STANDARD = re.compile(r"(Arial|Helvetica|Times|Courier)(?!.*Unicode)", re.IGNORECASE)
_SYMBOL_STANDARD = re.compile(r"(Symbol|ZapfDingbats|Dingbats)", re.IGNORECASE)
_SUBSET_PREFIX = re.compile(r"^[A-Z]{6}\+")


def in_builtin_faces(char: str) -> bool:
    """Whether PDFium's built-in faces draw ``char`` (so every machine measures it)."""
    if char in BUILTIN_EXTRA:
        return True
    try:
        char.encode("cp1252")
    except UnicodeEncodeError:
        return False
    return True


def font_dependent_chars(textpage: pdfium.PdfTextPage, census: PageCensus) -> frozenset[int]:
    """Indices of the characters of ``textpage`` that another machine's fonts could drop:
    the text layer leaves them out on every machine (see the module's docstring)."""
    if not census.loose_text:
        return frozenset()
    lone = _lone_characters(textpage, census.loose_text)
    outside = {
        index
        for index in lone.values()
        if not in_builtin_faces(chr(pdfium_c.FPDFText_GetUnicode(textpage, index)))
    }
    font_of = census.loose_text
    needy = {font_of[obj] for obj in census.unmeasured}
    needy |= {font_of[obj] for obj, index in lone.items() if index in outside}
    kinds = {font: _font_kind(font) for font in set(font_of.values())}
    return frozenset(
        index
        for obj, index in lone.items()
        if (kinds[font_of[obj]] == "latin" and index in outside)
        or (kinds[font_of[obj]] == "other" and font_of[obj] in needy)
    )


def _font_kind(font: int) -> str:
    """The kind of a font by its base name: ``latin`` or ``symbol`` (standard), else ``other``."""
    size = 256
    name = ctypes.create_string_buffer(size)
    handle = ctypes.cast(ctypes.c_void_p(font), pdfium_c.FPDF_FONT)
    length = pdfium_c.FPDFFont_GetBaseFontName(handle, name, size)
    base = _SUBSET_PREFIX.sub("", name.value.decode("latin-1") if length else "")
    base = base.replace(" ", "")
    if _SYMBOL_STANDARD.match(base):
        return "symbol"
    return "latin" if _LATIN_STANDARD.match(base) else "other"


def _lone_characters(textpage: pdfium.PdfTextPage, loose_text: dict[int, int]) -> dict[int, int]:
    """Object address -> its character's index, for walked objects in fonts not embedded
    that hold one character on the text page."""
    chars: dict[int, list[int]] = defaultdict(list)
    for index in range(textpage.count_chars()):
        obj = address(pdfium_c.FPDFText_GetTextObject(textpage, index))
        if obj in loose_text:  # generated characters have no object (address 0)
            chars[obj].append(index)
    return {obj: indexes[0] for obj, indexes in chars.items() if len(indexes) == 1}
