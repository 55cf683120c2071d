"""Lines and words with boxes for every block, for the layout formats (PDF text layer, hOCR,
ALTO) that place each word where it was printed.

Engines differ in what they give: Tesseract gives words, the embedded engine lines, a layout
VLM a box per block and Markdown inside it. The layout formats need words, so what is missing
is estimated from what is known: a line without words is cut at its spaces, each word
getting a share of the line's width by its length; a block with a box and no lines is cut
at its text lines, each getting an equal share of the block's height. Estimated boxes are
good enough for search to highlight the right line. Pure functions, no I/O.
"""

from __future__ import annotations

import re

from ocrflow.types import BOX_DIGITS, BBox, Block, BlockLabel, Line, Word

_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+")
_LIST_MARK = re.compile(r"^\s*(?:[-*+]|\d{1,9}[.)])\s+")
_EMPHASIS = re.compile(r"(\*\*|__|\*|_|`)(?=\S)(.+?)(?<=\S)\1")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_TAG = re.compile(r"<[^>]+>")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")
_COMMENT = re.compile(r"<!--.*?-->", re.S)


def plain_lines(markdown: str) -> list[str]:
    """The printed lines of a block's Markdown: heading and list marks, emphasis, links,
    HTML tags and table rules taken away, table cells joined by spaces; blank lines
    dropped."""
    lines = []
    for raw in _COMMENT.sub(" ", markdown).splitlines():
        if _TABLE_RULE.match(raw) or raw.strip() in {"$$", "```", "\\[", "\\]"}:
            continue
        line = _LIST_MARK.sub("", _HEADING.sub("", raw))
        line = _EMPHASIS.sub(r"\2", _LINK.sub(r"\1", line))
        line = _TAG.sub(" ", line).replace("|", " ")
        line = " ".join(line.split())
        if line:
            lines.append(line)
    return lines


def block_lines(block: Block) -> tuple[Line, ...]:
    """The block's lines: the engine's, else its text's lines spread over its box (without
    a box, lines without boxes). A figure block has no printed lines."""
    if block.lines:
        return block.lines
    if block.label is BlockLabel.FIGURE:
        return ()
    texts = plain_lines(block.text)
    if block.bbox is None or not texts:
        return tuple(Line(text) for text in texts)
    x0, y0, x1, y1 = block.bbox
    step = (y1 - y0) / len(texts)
    return tuple(
        Line(text, _rounded((x0, y0 + i * step, x1, y0 + (i + 1) * step)), block.confidence)
        for i, text in enumerate(texts)
    )


def line_words(line: Line) -> tuple[Word, ...]:
    """The line's words: the engine's, else its text cut at spaces, each word's box a
    share of the line's width in proportion to its characters (spaces included)."""
    if line.words:
        return line.words
    tokens = line.text.split()
    if line.bbox is None or not tokens:
        return tuple(Word(token, None, line.confidence) for token in tokens)
    x0, y0, x1, y1 = line.bbox
    per_char = (x1 - x0) / max(1, sum(len(t) for t in tokens) + len(tokens) - 1)
    words, cursor = [], x0
    for token in tokens:
        end = cursor + per_char * len(token)
        words.append(Word(token, _rounded((cursor, y0, min(end, x1), y1)), line.confidence))
        cursor = end + per_char
    return tuple(words)


def _rounded(box: BBox) -> BBox:
    x0, y0, x1, y1 = (round(min(1.0, max(0.0, v)), BOX_DIGITS) for v in box)
    return (x0, y0, max(x0, x1), max(y0, y1))
