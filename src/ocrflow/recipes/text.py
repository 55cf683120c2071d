"""Text helpers every recipe shares: loop detection and clean-up of model output.

LaTeX is left exactly as the model wrote it; only wrappers and model meta tokens go.
"""

from __future__ import annotations

import re

# Special tokens that leak into replies when ``skip_special_tokens`` is off:
# ``<|im_end|>``, ``<|ref|>``, DeepSeek's full-width ``<｜end▁of▁sentence｜>``, ...
_META_TOKEN = re.compile(r"<\|/?[A-Za-z0-9_▁.\-]{1,40}\|>|<｜[^｜<>\n]{1,40}｜>")
# A reply wrapped in one fence (the closing fence may be cut off).
_FENCE = re.compile(
    r"\A\s*```[ \t]*(?:markdown|md|html|json)?[ \t]*\n(.*?)\n?(?:```\s*)?\Z", re.S | re.I
)
_BLANK_LINES = re.compile(r"\n{3,}")
_TAG = re.compile(r"<[^<>\n]{1,200}>")
_SPACES = re.compile(r"\s+")
# A unit of 1-80 characters repeated at least ten times in a row (checked on markup-free text).
_MAX_UNIT = 80
_CHAR_LOOP = re.compile(rf"(.{{1,{_MAX_UNIT}}}?)\1{{9,}}", re.S)
# A probe of this many characters found again within _MAX_UNIT of itself flags a candidate.
_PROBE = 100
_HAS_LETTER = re.compile(r"[^\W\d_]")
_HAS_ALNUM = re.compile(r"[^\W_]")

#: A repeated span shorter than this many characters is not a loop (dot leaders, zeros).
LOOP_MIN_CHARS = 400
#: Consecutive repeats of a word n-gram (n <= 8) that make a loop ("the the the ...").
LOOP_MIN_WORD_REPEATS = 20
#: Consecutive repeats of a block of 1-8 lines that make a loop.
LOOP_MIN_LINE_REPEATS = 10
#: Fewer repeats suffice for a block of lines this long (a paragraph said over and over).
LOOP_LONG_BLOCK_CHARS = 200
LOOP_MIN_LONG_REPEATS = 4
#: A repeated word or line block must also span this many characters to count.
LOOP_MIN_BLOCK_CHARS = 80


def strip_meta_tokens(text: str) -> str:
    """Remove special tokens such as ``<|im_end|>`` or ``<｜end▁of▁sentence｜>``."""
    return _META_TOKEN.sub("", text)


def strip_code_fence(text: str) -> str:
    """Unwrap a reply that is one fenced block (```markdown ... ```); else return it as is.

    Only untagged fences and those tagged markdown, md, html or json are unwrapped: a page
    that is one block of source code keeps its fence.
    """
    match = _FENCE.match(text)
    return match.group(1) if match else text


def normalize_whitespace(text: str) -> str:
    """Trailing spaces off every line, at most one blank line in a row, no blank ends."""
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    return _BLANK_LINES.sub("\n\n", "\n".join(lines)).strip("\n")


def ensure_heading(text: str, level: int) -> str:
    """``text`` as a Markdown heading of ``level`` unless it already is a heading."""
    stripped = text.strip()
    if not stripped or stripped.startswith("#"):
        return stripped
    return "#" * level + " " + _SPACES.sub(" ", stripped)


def detect_repetition(text: str) -> bool:
    """True when ``text`` holds a degenerate generation loop.

    Three signs, each tuned so that tables, lists and forms with repeated *structure*
    (``| --- | --- |`` rows, empty cells, dot leaders) do not count:

    - a word n-gram (n <= 8) with a letter, repeated ``LOOP_MIN_WORD_REPEATS`` times;
    - a block of 1-8 lines with letters, repeated ``LOOP_MIN_LINE_REPEATS`` times (only
      ``LOOP_MIN_LONG_REPEATS`` times when the block is ``LOOP_LONG_BLOCK_CHARS`` long);
    - any 1-80 character unit with a letter or digit repeated over ``LOOP_MIN_CHARS``
      characters of markup-free text (catches loops in scripts without spaces).
    """
    return _has_word_loop(text) or _has_line_loop(text) or _has_char_loop(text)


def _has_word_loop(text: str) -> bool:
    """A run of one word n-gram repeated back to back (punctuation-only tokens skipped)."""
    words = [w for w in _TAG.sub(" ", text).split() if _HAS_ALNUM.search(w)]
    return any(_has_periodic_block(words, n, LOOP_MIN_WORD_REPEATS) for n in range(1, 9))


def _has_line_loop(text: str) -> bool:
    """A run of one block of lines repeated back to back (tags and blank lines skipped)."""
    stripped = (line.strip() for line in _TAG.sub(" ", text).splitlines())
    lines = [line for line in stripped if line]
    return any(
        _has_periodic_block(lines, n, LOOP_MIN_LINE_REPEATS, LOOP_MIN_LONG_REPEATS)
        for n in range(1, 9)
    )


def _has_char_loop(text: str) -> bool:
    """A short unit repeated over many characters once tags and spacing are gone.

    Cheap first: a loop of ``LOOP_MIN_CHARS`` covers some probe position (every
    ``stride`` characters) whose next ``_PROBE`` characters recur within ``_MAX_UNIT``;
    only around such positions does the regex run.
    """
    flat = _SPACES.sub(" ", _TAG.sub(" ", text))
    if len(flat) < LOOP_MIN_CHARS:
        return False
    stride = LOOP_MIN_CHARS - _PROBE - _MAX_UNIT
    for start in range(0, len(flat) - _PROBE, stride):
        probe = flat[start : start + _PROBE]
        recurs = flat.find(probe, start + 1, start + _PROBE + _MAX_UNIT + 1) > 0
        if recurs and _char_loop_near(flat, start):
            return True
    return False


def _char_loop_near(flat: str, start: int) -> bool:
    """Whether a loop of ``LOOP_MIN_CHARS`` or more runs through ``flat[start]``."""
    reach = LOOP_MIN_CHARS + _MAX_UNIT
    window = flat[max(0, start - reach) : start + reach + _PROBE + _MAX_UNIT]
    for match in _CHAR_LOOP.finditer(window):
        if len(match.group(0)) >= LOOP_MIN_CHARS and _HAS_ALNUM.search(match.group(1)):
            return True
    return False


def _has_periodic_block(
    items: list[str], period: int, repeats: int, long_repeats: int | None = None
) -> bool:
    """Whether a block of ``period`` items repeats ``repeats`` times in a row.

    A block of ``LOOP_LONG_BLOCK_CHARS`` or more needs only ``long_repeats`` (when given).
    """
    fewest = min(repeats, long_repeats or repeats)
    run = 0
    for i in range(period, len(items)):
        run = run + 1 if items[i] == items[i - period] else 0
        if run >= period * (fewest - 1):
            block = " ".join(items[i - period + 1 : i + 1])
            is_long = len(block) >= LOOP_LONG_BLOCK_CHARS
            need = long_repeats if long_repeats and is_long else repeats
            if run >= period * (need - 1) and _is_loop_block(block, need):
                return True
    return False


def _is_loop_block(block: str, repeats: int) -> bool:
    """A repeated block counts when it has a letter and spans enough characters."""
    return bool(_HAS_LETTER.search(block)) and len(block) * repeats >= LOOP_MIN_BLOCK_CHARS
