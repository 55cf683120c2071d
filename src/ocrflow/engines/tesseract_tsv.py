"""Tesseract's TSV output (``tesseract … tsv``) as the page's text and blocks.

One row an element: level 1 the page, 2 a block, 3 a paragraph, 4 a line, 5 a word, each
with its box in pixels (``left top width height``) and, for words, a confidence 0..100.
The text is rebuilt as Tesseract's plain-text output writes it (words apart by a space,
lines by a newline, paragraphs by a blank line), so asking for TSV costs no second run;
each paragraph is one block with its lines and words, boxes in 0..1 of the page.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from statistics import median

from ocrflow.errors import EngineError
from ocrflow.types import Block, BlockLabel, Line, Word, union_box, unit_box, unit_score

_COLUMNS = 12
_PAGE, _PARAGRAPH, _LINE, _WORD = 1, 3, 4, 5
#: Bullets and numbers that make a paragraph a list item.
#: Words a line needs for its slope to count (two always fit a line).
_SKEW_WORDS = 3
_BULLETS = ("•", "·", "▪", "◦", "●", "○", "■", "□", "-", "–", "—", "*")


@dataclass(frozen=True, slots=True)
class TsvPage:
    """The page as Tesseract read it: its text and one block a paragraph."""

    text: str
    blocks: tuple[Block, ...] = ()
    #: Degrees the printed lines run down to the right (``line_skew``).
    skew: float = 0.0
    #: Degrees clockwise the page was turned to read it (``tesseract_osd.py``).
    rotation: int = 0


@dataclass(slots=True)
class _Paragraph:
    lines: list[tuple[tuple[int, int, int, int], list[Word]]] = field(default_factory=list)


def parse_tsv(tsv: str) -> TsvPage:
    """The text and blocks of Tesseract's TSV for one page; ``EngineError`` when the output
    is not its TSV."""
    rows = tsv.splitlines()
    if not rows or not rows[0].startswith("level\t"):
        raise EngineError(f"tesseract gave no TSV: {tsv[:200]!r}")
    width = height = 0
    paragraphs: list[_Paragraph] = []
    for row in rows[1:]:
        cells = row.split("\t")
        if len(cells) < _COLUMNS - 1:
            continue
        level, box = int(cells[0]), _pixels(cells)
        if level == _PAGE:
            width, height = box[2], box[3]
        elif level == _PARAGRAPH:
            paragraphs.append(_Paragraph())
        elif level == _LINE and paragraphs:
            paragraphs[-1].lines.append((box, []))
        elif level == _WORD and paragraphs and paragraphs[-1].lines:
            text = cells[11].strip() if len(cells) > 11 else ""
            if text:
                size = (max(width, 1), max(height, 1))
                paragraphs[-1].lines[-1][1].append(_word(text, box, float(cells[10]), size))
    blocks = in_page_order([b for b in (_block(p, width, height) for p in paragraphs) if b])
    lines = [words for p in paragraphs for _, words in p.lines]
    skew = line_skew(lines, max(width, 1), max(height, 1))
    return TsvPage("\n\n".join(block.text for block in blocks), blocks, skew)


def in_page_order(blocks: list[Block]) -> tuple[Block, ...]:
    """``blocks`` in Tesseract's order, but for a heading it put between two columns that
    both end above it: it goes after them. Tesseract reads a heading set under two columns
    (linn's "Additional Features", over the list it heads) after the first column, in the
    middle of a sentence that runs on into the second; ``pdftotext`` of the searchable PDF,
    like a reader, reads it after both. A block is moved when the blocks after it end above
    its top, the block after those starts under its bottom, and it stands closer to that
    one than to the block before it (it heads what follows it; a column's last paragraph,
    after a short next column, stays where it is)."""
    ordered = list(blocks)
    k = 1
    while k < len(ordered) - 2:
        head, before = ordered[k], ordered[k - 1]
        if head.bbox is None or before.bbox is None or before.bbox[3] > head.bbox[1]:
            k += 1
            continue
        j = k + 1
        while j < len(ordered) and (box := ordered[j].bbox) is not None and box[3] <= head.bbox[1]:
            j += 1
        after = ordered[j].bbox if j < len(ordered) else None
        if j > k + 1 and after is not None and head.bbox[3] <= after[1]:
            below, above = after[1] - head.bbox[3], head.bbox[1] - before.bbox[3]
            if below < above:  # it heads what follows
                ordered.insert(j - 1, ordered.pop(k))
                continue
        k += 1
    return tuple(ordered)


def line_skew(lines: list[list[Word]], width: int, height: int) -> float:
    """The page's skew in degrees, from the words of its lines: Tesseract reads a skewed
    page level, yet boxes each word upright where it lies, so along a line the words' centres
    climb or fall. The median over lines of three words or more of the least-squares slope
    of their centres (0.0 without such lines)."""
    slopes = []
    for words in lines:
        boxes = [w.bbox for w in words if w.bbox]
        if len(boxes) < _SKEW_WORDS:
            continue
        xs = [(box[0] + box[2]) / 2 * width for box in boxes]
        ys = [(box[1] + box[3]) / 2 * height for box in boxes]
        mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
        spread = sum((x - mean_x) ** 2 for x in xs)
        if spread > 0:
            rise = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True))
            slopes.append(rise / spread)
    return round(math.degrees(math.atan(median(slopes))), 2) if slopes else 0.0


def _pixels(cells: list[str]) -> tuple[int, int, int, int]:
    left, top, width, height = (int(v) for v in cells[6:10])
    return left, top, left + width, top + height


def _word(text: str, box: tuple[int, int, int, int], conf: float, size: tuple[int, int]) -> Word:
    return Word(text, unit_box(box, *size), unit_score(conf / 100) if conf >= 0 else None)


def _block(paragraph: _Paragraph, width: int, height: int) -> Block | None:
    lines = tuple(
        Line(
            " ".join(w.text for w in words),
            unit_box(box, max(width, 1), max(height, 1)),
            _mean(words),
            tuple(words),
        )
        for box, words in paragraph.lines
        if words
    )
    if not lines:
        return None
    text = "\n".join(line.text for line in lines)
    label = BlockLabel.LIST_ITEM if text.startswith(_BULLETS) else BlockLabel.TEXT
    words = [w for line in lines for w in line.words]
    return Block(label, text, union_box(line.bbox for line in lines), _mean(words), lines)


def _mean(words: list[Word]) -> float | None:
    """Word confidences averaged by word length."""
    scored = [(w.confidence, len(w.text)) for w in words if w.confidence is not None]
    total = sum(n for _, n in scored)
    return unit_score(sum(c * n for c, n in scored) / total) if total else None
