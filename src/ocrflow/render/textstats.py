"""Language-agnostic defect measures for extracted text (pure functions, no PDF involved).

Every character is mapped to a one-letter class: the script of a letter ("L" Latin, "C"
Cyrillic, "A" Arabic, "D" Devanagari, "J" Han and kana, "K" Hangul, ...), "0" a digit, "m" a
combining mark, "h" a word-internal joiner (hyphen, apostrophe, dot), "n" a separator found
inside numbers, "p" other punctuation, "x" a glyph pdfium could not map. Whitespace tokens
are then judged by the shape of their class string, so no word list or language model is
needed: a token written in one script, with joiners and at most a digit suffix or prefix per
part, is clean; anything else is noise.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass

# Word-internal joiners: hyphens and dashes, apostrophes, dots, underscore, Hebrew
# geresh/gershayim/maqaf.
_JOINERS = frozenset("-‐‑–—'’._·־׳״")
# Separators inside numbers, dates, paths, addresses, formulas and code: 1,234  12:30  and/or
# 9%  a@b  R&D  f(x)  list[str].
_SEPARATORS = frozenset(",:/%@&()[]{}")
# Glyphs pdfium could not map come out as U+FFFD (or U+FFFC); see also extra_unmapped.
_UNMAPPED = frozenset("\ufffd\ufffc")

# Script of a letter by block start; a letter outside every block is "O" (other script).
# Han and kana share "J" (written without spaces, one token a character); Hangul is "K".
# Letterlike symbols (ℝ, ℓ) and mathematical alphanumerics (𝜀, 𝐱) count as Latin.
_SCRIPT_BLOCKS: tuple[tuple[int, str], ...] = (
    (0x0000, "L"), (0x02B0, "O"), (0x0370, "G"), (0x0400, "C"), (0x0530, "R"),
    (0x0590, "H"), (0x0600, "A"), (0x07C0, "O"), (0x0900, "D"), (0x0980, "B"),
    (0x0A00, "U"), (0x0A80, "V"), (0x0B00, "W"), (0x0B80, "M"), (0x0C00, "N"),
    (0x0C80, "Q"), (0x0D00, "Y"), (0x0D80, "S"), (0x0E00, "T"), (0x0F00, "O"),
    (0x10A0, "E"), (0x1100, "K"), (0x1200, "O"), (0x1E00, "L"), (0x1F00, "G"),
    (0x2000, "O"), (0x2100, "L"), (0x2150, "O"), (0x2C60, "L"), (0x2C80, "O"),
    (0x2DE0, "C"), (0x2E00, "O"), (0x2E80, "J"), (0x3130, "K"), (0x3190, "J"),
    (0xA640, "C"), (0xA6A0, "O"), (0xA720, "L"), (0xA800, "O"), (0xAC00, "K"),
    (0xD7B0, "O"), (0xF900, "J"), (0xFB00, "L"), (0xFB1D, "H"), (0xFB50, "A"),
    (0xFE00, "O"), (0xFE70, "A"), (0xFF00, "L"), (0xFF66, "J"), (0xFFA0, "K"),
    (0xFFE0, "O"), (0x1D400, "L"), (0x1D800, "O"), (0x20000, "J"), (0x31350, "O"),
)  # fmt: skip
_BLOCK_STARTS = tuple(start for start, _ in _SCRIPT_BLOCKS)

# Parts of one script (or digits) joined by joiners or separators; a part may carry one
# letter/digit switch: "COVID-19", "2nd", "x86", "1,2-dibromo-propan-1-ol", "and/or".
_CLEAN = re.compile(r"(?=[^A-Z]*([A-Z]))?(?:\1+0*|0+\1*)(?:[hn]+(?:\1+0*|0+\1*))*")
_CLEAN_TOKEN = re.compile(r"(?<!\S)[phn]*" + _CLEAN.pattern + r"[phn]*(?!\S)")
_PUNCT_TOKEN = re.compile(r"(?<!\S)[phn]+(?!\S)")
_LETTER_CLASSES = "".join(sorted({tag for _, tag in _SCRIPT_BLOCKS}))
_SCRIPT_LETTER = re.compile(f"[{_LETTER_CLASSES}]")
_SPLIT_LOGOGRAMS = re.compile(r"(J)|(?<=K)(?=[^K])|(?<=[^K])(?=K)")
_TRIM = "phn"
_NON_SPACED = "JKT"  # scripts where a lone character is a normal word or not a letter run
_SPACED_LETTER = "[" + "".join(sorted(set(_LETTER_CLASSES) - set(_NON_SPACED))) + "]"
_SPACED_RUN = re.compile(r"(?:(?<!\S)[phn]*" + _SPACED_LETTER + r"[phn]*(?:\s+|$)){3,}")
# A capital after a small letter that does not start a camel-case part: "indigS", "aVc".
_CASE_NOISE = re.compile(r"[a-zа-я][A-ZА-Я](?![a-zа-я])")
# Symbols that OCR engines make out of specks and stains; prose rarely uses them.
_JUNK_SYMBOLS = re.compile(r"[<>^|~\\{}■□▪▫¦¬¤¨]")
_LONE_LETTER = re.compile(r"(?<!\S)[(\"'“‘«]*([^\W\d_])[.,;:!?)\"'”’»]*(?!\S)")
_LATIN1_LETTERS = re.compile("[\u00c0-\u00ff]")
# A word of four or more letters all from the Latin-1 range: no Latin-script language writes
# one, while every Russian, Greek or Hebrew word decoded as Latin-1 is one.
_LATIN1_WORD = re.compile(r"(?<![^\W\d_])[\u00c0-\u00ff]{4,}(?![^\W\d_])")
# ч and Ч of cp1251 read as Latin-1: a division or multiplication sign inside a word.
_SIGN_IN_WORD = re.compile(r"(?<=[^\W\d_])[÷×](?=[^\W\d_])")
_UTF8_AS_CP1252 = re.compile("[\u00c2\u00c3][\u0080-\u00bf]|\u00e2\u20ac")
# The eight letters most frequent in Latin-script languages: 46-60% of the letters of
# English, German, French, Polish, Czech, Hungarian, Turkish, Welsh or Vietnamese text.
_LATIN_COMMON = re.compile("[aeinorstAEINORST]")
_ASCII_WORDS = re.compile("[a-zA-Z]{3,}")


@dataclass(frozen=True, slots=True)
class TextStats:
    """Defect measures of a text, each a share in 0..1 (``latin_common`` is 1.0 when unknown).

    ``unmapped``: glyphs without a Unicode value among visible characters. ``wordlike``:
    tokens of clean shape among tokens with letters or digits. ``mixed_script``: tokens that
    mix scripts. ``letter_spaced``: letters standing alone in runs of three or more.
    ``mojibake``: Latin letters from the Latin-1 range (another script decoded as Latin-1);
    ``mojibake_words`` counts words made of such letters only (four or more).
    ``latin_common``: share of a e i n o r s t among ASCII letters (low when glyph codes are
    shifted, e.g. 0.20 for English shifted by three letters).
    ``letters``: letters among letters and digits (1.0 for a text without either).
    """

    unmapped: float
    wordlike: float
    mixed_script: float
    letter_spaced: float
    mojibake: float
    mojibake_words: int
    latin_common: float
    letters: float


def measure_text(text: str, *, extra_unmapped: int = 0) -> TextStats:
    """Measure ``text``; ``extra_unmapped`` counts unmapped glyphs already removed from it."""
    classes = text.translate(_class_table(text))
    shape = _shape(text, classes)
    visible = len(classes) - classes.count(" ")
    letters = sum(map(classes.count, _LETTER_CLASSES))
    digits = classes.count("0")
    wordlike, mixed = _token_shares(shape)
    return TextStats(
        unmapped=(classes.count("x") + extra_unmapped) / max(1, visible + extra_unmapped),
        wordlike=wordlike,
        mixed_script=mixed,
        letter_spaced=_letter_spaced_share(shape, letters),
        mojibake=_mojibake_share(text, classes.count("L")),
        mojibake_words=len(_LATIN1_WORD.findall(text)),
        latin_common=_latin_common_share(text),
        letters=letters / (letters + digits) if letters + digits else 1.0,
    )


def measure_ocr_noise(text: str) -> float:
    """Share of tokens showing recognition noise: unclean shape, junk symbols, case flips.

    A lone letter counts half, unless it is a usual one-letter word of the page. Clean OCR
    (Tesseract on a good scan) stays under 0.01; born-digital text in some scripts reaches
    0.08, so this is only used for layers made by another OCR program.
    """
    shape = _shape(text)
    tokens = len(shape.split())
    if not tokens:
        return 0.0
    unclean = len(_PUNCT_TOKEN.sub(" ", _CLEAN_TOKEN.sub(" ", shape)).split())
    lone = [letter.lower() for letter in _LONE_LETTER.findall(text)]
    stray = _stray_letters([c for c in lone if _char_class(c) not in _NON_SPACED])
    flips = len(_CASE_NOISE.findall(text)) + len(_JUNK_SYMBOLS.findall(text))
    return (unclean + flips + stray / 2) / tokens


def _stray_letters(lone: list[str]) -> int:
    """Lone letters that are not one of the language's usual one-letter words.

    One-letter words are few and frequent ("a", "I"; "и", "в", "с"); letters left over by
    broken recognition are many and rare, so a letter making up a tenth of them is a word.
    """
    counts = Counter(lone)
    usual = max(2, len(lone) // 10)
    return sum(count for count in counts.values() if count < usual)


def _shape(text: str, classes: str | None = None) -> str:
    """Class string of ``text``, marks dropped, each Han or kana character a token."""
    if classes is None:
        classes = text.translate(_class_table(text))
    return _SPLIT_LOGOGRAMS.sub(r" \1 ", classes.replace("m", ""))


def _class_table(text: str) -> dict[int, str]:
    """Map each distinct character of ``text`` to its one-letter class."""
    return {ord(ch): _char_class(ch) for ch in set(text)}


def _char_class(ch: str) -> str:
    if ch.isspace():
        return " "
    if ch in _UNMAPPED:
        return "x"
    category = unicodedata.category(ch)
    major = category[0]
    if major == "L":
        return _SCRIPT_BLOCKS[bisect.bisect_right(_BLOCK_STARTS, ord(ch)) - 1][1]
    if major == "M" or category == "Cf":
        # Marks and format characters (ZWJ, ZWNJ) live inside words of many scripts.
        return "m"
    if category == "Nd":
        return "0"
    if major == "C":
        return "x"
    if ch in _JOINERS:
        return "h"
    return "n" if ch in _SEPARATORS else "p"


def _token_shares(shape: str) -> tuple[float, float]:
    """Share of tokens with a clean shape, and of tokens mixing scripts.

    Tokens of punctuation alone are left out. Regular expressions over the whole string do
    the counting: a page holds thousands of tokens and this runs for every page.
    """
    total = len(shape.split()) - len(_PUNCT_TOKEN.findall(shape))
    if total <= 0:
        return 0.0, 0.0
    unclean = _PUNCT_TOKEN.sub(" ", _CLEAN_TOKEN.sub(" ", shape)).split()
    mixed = sum(1 for token in unclean if _is_mixed_script(token))
    return 1.0 - len(unclean) / total, mixed / total


def _is_mixed_script(token: str) -> bool:
    """Whether a token holds letters of two scripts; Greek beside Latin is mathematics."""
    scripts = set(_SCRIPT_LETTER.findall(token))
    if "L" in scripts:
        scripts.discard("G")
    return len(scripts) > 1


def _letter_spaced_share(shape: str, letters: int) -> float:
    """Share of letters standing alone in runs of three or more ("T h i s  i s")."""
    if not letters:
        return 0.0
    spaced = sum(len(run.group().split()) for run in _SPACED_RUN.finditer(shape))
    return min(1.0, spaced / letters)


def _mojibake_share(text: str, latin_letters: int) -> float:
    """Share of Latin letters that look like another script decoded as Latin-1 or cp1252."""
    if latin_letters < 20:
        return 0.0
    high = len(_LATIN1_LETTERS.findall(text))
    utf8 = len(_UTF8_AS_CP1252.findall(text))
    signs = len(_SIGN_IN_WORD.findall(text))
    return min(1.0, (high + 4 * utf8 + 10 * signs) / latin_letters)


def _latin_common_share(text: str) -> float:
    """Share of a e i n o r s t in ASCII words of three letters or more (not formula
    variables); 1.0 when there are too few letters to judge."""
    words = "".join(_ASCII_WORDS.findall(text))
    if len(words) < 200:
        return 1.0
    return len(_LATIN_COMMON.findall(words)) / len(words)
