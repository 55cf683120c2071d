"""Native text-layer extraction and a quality score that rejects garbage layers.

``extract_text_layer`` runs in a render worker on an open pypdfium2 page and returns the
text plus the cheap signals the scorer needs. ``score_text_layer`` is a pure function of
that value, so the policy is unit-tested without PDFs. Thresholds were set by measuring the
shared corpus (``bench/bench_textlayer.py``); each says why next to it.
"""

from __future__ import annotations

import itertools
import re
import statistics
from dataclasses import dataclass

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from ocrflow.errors import RenderError
from ocrflow.render.fontdeps import font_dependent_chars
from ocrflow.render.pageobjects import SCAN_COVERAGE, census_objects, hidden_share
from ocrflow.render.textblocks import LineEnds, Rect, text_blocks
from ocrflow.render.textstats import TextStats, measure_ocr_noise, measure_text
from ocrflow.types import Block

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
    (render mode 3 or 7, or painted before an image covering the page). ``blocks``: its
    paragraphs with their lines' boxes (``textblocks.py``). ``scan_dpi``: the resolution
    of the finest image covering the page (0.0 when none does: a born-digital page).
    """

    text: str
    char_count: int
    control_chars: int = 0
    image_coverage: float = 0.0
    hidden_share: float = 0.0
    scan_dpi: float = 0.0
    blocks: tuple[Block, ...] = ()


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

_WHITESPACE = re.compile(r"\s+")
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
#: Stands for a character left out until the lines are laid out (a noncharacter: no PDF
#: text maps to it).
_LEFT_OUT = "\uffff"
_LEFT_OUT_RUN = re.compile(" *\uffff[\uffff ]*")


def extract_text_layer(page: pdfium.PdfPage) -> TextLayer:
    """Read the native text of ``page`` and the signals ``score_text_layer`` needs.

    Characters whose extraction depends on the fonts installed on the machine are left out
    (``fontdeps.py``), so that a page gives the same text layer everywhere. Raises
    ``RenderError`` when pdfium cannot load the page's text.
    """
    census = census_objects(page)
    try:
        textpage = page.get_textpage()
    except pdfium.PdfiumError as exc:
        raise RenderError(f"cannot read the text layer: {exc}") from exc
    try:
        left_out = font_dependent_chars(textpage, census)
        raw, blocks = _read_text(textpage, left_out, page)
        hidden = hidden_share(textpage, census, left_out) if raw else 0.0
    finally:
        textpage.close()
    text, controls = _CONTROL.subn("", _clean(raw))
    return TextLayer(
        text=text,
        char_count=len(_WHITESPACE.sub("", text)),
        control_chars=controls,
        image_coverage=census.image_coverage,
        hidden_share=hidden,
        blocks=blocks,
        scan_dpi=census.scan_dpi,
    )


def _clean(raw: str) -> str:
    """Hyphenation marks out, carriage returns as newlines (control characters go after)."""
    return raw.replace("\ufffe", "").replace("\r", "\n")


def _clean_line(line: str) -> str:
    """What the text's clean-up does to one line (most lines need nothing: checked fast)."""
    if line.isprintable():
        return line
    return _CONTROL.sub("", _clean(line))


def _read_text(
    textpage: pdfium.PdfTextPage,
    left_out: frozenset[int] = frozenset(),
    page: pdfium.PdfPage | None = None,
) -> tuple[str, tuple[Block, ...]]:
    """All text of the page, lines joined by "\\n", a blank line at large vertical gaps;
    with ``page``, its blocks too (``textblocks.py``).

    The characters at the indices ``left_out`` are removed, and lines left blank by that
    with them. pdfium writes U+FFFE where it joined a word hyphenated across lines; the
    caller drops it.
    """
    if textpage.count_chars() <= 0:
        return "", ()
    text = textpage.get_text_range()
    if left_out:
        text = _mark_left_out(textpage, text, left_out)
    lines = text.split("\r\n")
    line_ends = _line_ends(textpage, lines) if page is not None or len(lines) > 2 else []
    breaks = _paragraph_breaks(line_ends) if len(lines) > 2 else set()
    ends = ("\n\n" if i in breaks else "\n" for i in range(len(lines)))
    kept = [_drop_left_out(line) for line in lines]
    joined = "".join(line + end for line, end in zip(kept, ends, strict=True) if line is not None)
    blocks = text_blocks(page, textpage, kept, breaks, line_ends, _clean_line) if page else ()
    return (joined[:-1] if joined.endswith("\n") else joined), blocks


def _mark_left_out(textpage: pdfium.PdfTextPage, text: str, left_out: frozenset[int]) -> str:
    """``text`` with the characters of ``left_out`` replaced by a placeholder, in place (the
    line layout maps text positions to character boxes)."""
    chars = list(text)
    for index in left_out:
        position = pdfium_c.FPDFText_GetTextIndexFromCharIndex(textpage, index)
        if 0 <= position < len(chars):
            chars[position] = _LEFT_OUT
    return "".join(chars)


def _drop_left_out(line: str) -> str | None:
    """The line without placeholders, right-stripped; None when only they made it a line.

    A run of left-out characters becomes one space, as PDFium puts one in the gap such a
    run leaves where it could not place the characters.
    """
    if _LEFT_OUT not in line:
        return line.rstrip()
    kept = _LEFT_OUT_RUN.sub(" ", line)
    if line.lstrip(" ").startswith(_LEFT_OUT):
        kept = kept.lstrip(" ")
    return kept.rstrip() if kept.strip() else None


def _paragraph_breaks(line_ends: list[LineEnds]) -> set[int]:
    """Lines followed by a gap taller than a line, or by a jump up (a new column): the gap
    runs from the bottom of a line's last character to the top of the next one's first."""
    heights = [first[1] - last[3] for _, first, last, *_ in line_ends if first[1] > last[3]]
    if not heights:
        return set()
    height = statistics.median(heights)
    breaks = set()
    for (i, _, prev_last, *_), (_, next_first, *_) in itertools.pairwise(line_ends):
        gap = prev_last[3] - next_first[1]
        if gap > 0.9 * height or gap < -3.0 * height:
            breaks.add(i)
    return breaks


def _line_ends(textpage: pdfium.PdfTextPage, lines: list[str]) -> list[LineEnds]:
    """(line index, loose box of its first visible character, of its last, and their
    character indices) for non-blank lines: the paragraph breaks come from the boxes, the
    line boxes (``textblocks.py``) from the characters between.

    Loose boxes (font ascent to descent) keep the height steady across letters. pdfium may
    put two printed lines in one text line, hence the last character for the bottom.
    """
    rect = pdfium_c.FS_RECTF()
    handle = getattr(textpage, "raw", textpage)  # the bare handle: no conversion a call
    found: list[LineEnds] = []
    offset = 0
    for i, line in enumerate(lines):
        visible = line.replace(_LEFT_OUT, " ")
        first = len(visible) - len(visible.lstrip())
        last = len(visible.rstrip()) - 1
        if last >= first:
            head = _char_box(handle, offset + first, rect)
            tail = _char_box(handle, offset + last, rect)
            if head is not None and tail is not None:
                found.append((i, head[1], tail[1], head[0], tail[0]))
        offset += len(line) + 2
    return found


def _char_box(handle: object, text_index: int, rect: pdfium_c.FS_RECTF) -> tuple[int, Rect] | None:
    """The character index and loose box (left, top, right, bottom) of the character at
    ``text_index`` of the text page ``handle``, if it has one."""
    char = pdfium_c.FPDFText_GetCharIndexFromTextIndex(handle, text_index)
    if char < 0 or not pdfium_c.FPDFText_GetLooseCharBox(handle, char, rect):
        return None
    return char, (rect.left, rect.top, rect.right, rect.bottom)
