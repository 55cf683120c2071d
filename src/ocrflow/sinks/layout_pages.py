"""A page of the document model in whole pixels, for the layout formats (hOCR, ALTO).

Both formats place every block, line and word by integer coordinates on a page of known
pixel size, and their readers expect each box to lie inside its parent's. The model gives
boxes as fractions of the upright page, some of them estimated (``document.words``) and some
missing, so this module decides once, for both sinks:

- **The page's pixel size**: the image the engine read (``Page.size``); a page no engine
  read (a text-layer page) has none, so it gets its PDF page size at 300 dpi when the page
  records it (``attributes["page_points"]``) or else a nominal A4 page at 300 dpi
  (2480 x 3508). The fractions are exact either way; only the unit is nominal.
- **Boxes for what has none**: a block without a box (a Markdown-only model) is laid out
  in reading order down the page, its text wrapped into lines of about 90 characters, one
  slice of the page's height each; lines and words without boxes share their parent's box
  (``block_lines``, ``line_words``). On a page the engine turned to read it, this is done
  on the page as read and turned back, so words follow the text's direction.
- **Containment**: coordinates are floored and ceiled to whole pixels, then each line is
  grown to hold its words and each block to hold its lines, all clipped to the page.
"""

from __future__ import annotations

import dataclasses
import math
import re
import textwrap
from dataclasses import dataclass
from functools import cache
from importlib.metadata import PackageNotFoundError, version

from ocrflow.document import Document, Page, block_lines, line_words, plain_lines
from ocrflow.types import BBox, Block, BlockLabel, Line, Word, unturn_blocks

#: The resolution at which a page's size in PDF points becomes pixels.
POINTS_DPI = 300
#: The pixel size of a page that records none: A4 at ``POINTS_DPI``.
NOMINAL_SIZE = (2480, 3508)
#: Top and bottom margin, and the most height one printed line gets, when blocks without
#: boxes are laid out down the page (fractions of its height).
_MARGIN = 0.05
_MAX_LINE = 0.03
#: Characters of a printed line across the page, where a block's text is wrapped into lines.
_WRAP_CHARS = 90
#: What XML 1.0 cannot hold at all (control characters, lone surrogates, U+FFFE/U+FFFF):
#: a text layer or a model may produce them, and one makes the whole file unreadable.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_safe(text: str) -> str:
    """``text`` without the characters XML 1.0 cannot hold."""
    return _NOT_XML.sub("", text)


@dataclass(frozen=True, slots=True)
class PixelBox:
    """A box in whole pixels: ``x0 <= x1``, ``y0 <= y1``, origin at the top left."""

    x0: int
    y0: int
    x1: int
    y1: int

    @property
    def width(self) -> int:
        return self.x1 - self.x0

    @property
    def height(self) -> int:
        return self.y1 - self.y0

    def union(self, other: PixelBox) -> PixelBox:
        """The smallest box holding both."""
        return PixelBox(
            min(self.x0, other.x0),
            min(self.y0, other.y0),
            max(self.x1, other.x1),
            max(self.y1, other.y1),
        )


@dataclass(frozen=True, slots=True)
class PixelWord:
    text: str
    box: PixelBox
    confidence: float | None


@dataclass(frozen=True, slots=True)
class PixelLine:
    box: PixelBox
    words: tuple[PixelWord, ...]
    confidence: float | None


@dataclass(frozen=True, slots=True)
class PixelBlock:
    """One block of the page; a figure has no lines, an estimated block ``estimated``."""

    label: BlockLabel
    source_label: str | None
    box: PixelBox
    lines: tuple[PixelLine, ...]
    confidence: float | None
    estimated: bool = False


@dataclass(frozen=True, slots=True)
class PixelPage:
    """A page in pixels. ``size_source``: ``engine`` (the image read), ``points`` (the PDF
    page at ``POINTS_DPI``) or ``nominal`` (``NOMINAL_SIZE``)."""

    number: int
    width: int
    height: int
    size_source: str
    blocks: tuple[PixelBlock, ...]
    confidence: float | None
    #: Degrees counterclockwise the text stands on the page (the turn the engine gave the
    #: page to read it), as ALTO's ``ROTATION`` and hOCR's ``textangle`` count.
    text_angle: int = 0


def source_name(document: Document) -> str:
    """What the outputs call the source: its name for outputs, else its URI."""
    return xml_safe(str(document.metadata.get("source_name") or document.source))


def engine_name(document: Document) -> str:
    """The engine that read the document, as the outputs record it."""
    return xml_safe(str(document.metadata.get("engine") or "unknown"))


@cache
def ocrflow_version() -> str:
    """The installed ocrflow's version, which the formats record as the producing software
    (read from the package metadata: ``ocrflow/__init__`` belongs to a higher layer)."""
    try:
        return version("ocrflow")
    except PackageNotFoundError:
        return "unknown"


def page_pixels(page: Page) -> tuple[int, int, str]:
    """The page's pixel width, height and where they come from (see the module notes)."""
    if page.size is not None and page.size.width > 0 and page.size.height > 0:
        # Every reader records the page as rendered, the frame its blocks' boxes are in.
        return page.size.width, page.size.height, "engine"
    points = page.attributes.get("page_points")
    if isinstance(points, list | tuple) and len(points) == 2:
        try:
            w, h = (round(float(v) * POINTS_DPI / 72) for v in points)
        except (TypeError, ValueError):
            w = h = 0
        if w > 0 and h > 0:
            return w, h, "points"
    return NOMINAL_SIZE[0], NOMINAL_SIZE[1], "nominal"


def pixel_page(page: Page) -> PixelPage:
    """The page's blocks, lines and words in whole pixels, each inside its parent."""
    width, height, source = page_pixels(page)
    # Estimates follow the reading direction: a page the engine turned to read it has
    # lines running up or down the page, so missing boxes are estimated on the page as
    # read (turned) and turned back onto the page as rendered.
    turn = page.rotation % 360 if page.rotation % 90 == 0 else 0
    read = unturn_blocks(page.blocks, (360 - turn) % 360) if turn else page.blocks
    placed = _place_unboxed(read)
    complete = tuple(_complete(block) for block, _ in placed)
    rendered = unturn_blocks(complete, turn) if turn else complete
    blocks = []
    for block, (_, estimated) in zip(rendered, placed, strict=True):
        converted = _pixel_block(block, width, height, estimated)
        if converted is not None:
            blocks.append(converted)
    return PixelPage(page.number, width, height, source, tuple(blocks), page.confidence, turn)


def _complete(block: Block) -> Block:
    """The block with every line and word spelled out, each with a box where its parent
    has one."""
    lines = tuple(
        dataclasses.replace(line, words=_boxed_words(line)) for line in _boxed_lines(block)
    )
    return dataclasses.replace(block, lines=lines)


def _place_unboxed(blocks: tuple[Block, ...]) -> list[tuple[Block, bool]]:
    """Each block with a box: its own, or a slice of the page in reading order, its text
    wrapped into printed lines of about ``_WRAP_CHARS`` (a model writes a paragraph as one
    Markdown line)."""
    wrapped = {
        i: _wrapped(b)
        for i, b in enumerate(blocks)
        if b.bbox is None and b.label is not BlockLabel.FIGURE
    }
    total = sum(max(1, len(lines)) for lines in wrapped.values())
    step = min(_MAX_LINE, (1 - 2 * _MARGIN) / total) if total else 0.0
    top, placed = _MARGIN, []
    for i, block in enumerate(blocks):
        if i not in wrapped:
            placed.append((block, False))
            continue
        texts = wrapped[i]
        box = (_MARGIN, top, 1 - _MARGIN, top + max(1, len(texts)) * step)
        score = block.confidence
        lines = tuple(
            Line(text, (_MARGIN, top + n * step, 1 - _MARGIN, top + (n + 1) * step), score)
            for n, text in enumerate(texts)
        )
        top = box[3]
        placed.append((dataclasses.replace(block, bbox=box, lines=lines), True))
    return placed


def _wrapped(block: Block) -> list[str]:
    texts = [line.text for line in block.lines] or plain_lines(block.text)
    return [part for text in texts for part in textwrap.wrap(text, _WRAP_CHARS) or [text]]


def _pixel_block(block: Block, width: int, height: int, estimated: bool) -> PixelBlock | None:
    if block.bbox is None:  # a figure without a box: nowhere to put it
        return None
    box = _pixels(block.bbox, width, height)
    lines = []
    for line in block.lines:
        converted = _pixel_line(line, width, height)
        if converted is not None:
            lines.append(converted)
            box = box.union(converted.box)
    return PixelBlock(
        block.label, block.source_label, box, tuple(lines), block.confidence, estimated
    )


def _boxed_lines(block: Block) -> tuple[Line, ...]:
    """The block's lines, each with a box: its own, else an equal slice of the block's."""
    lines = block_lines(block)
    if block.bbox is None or all(ln.bbox is not None for ln in lines):
        return lines
    x0, y0, x1, y1 = block.bbox
    step = (y1 - y0) / max(1, len(lines))
    return tuple(
        ln
        if ln.bbox is not None
        else dataclasses.replace(ln, bbox=(x0, y0 + i * step, x1, y0 + (i + 1) * step))
        for i, ln in enumerate(lines)
    )


def _pixel_line(line: Line, width: int, height: int) -> PixelLine | None:
    if line.bbox is None:
        return None
    box = _pixels(line.bbox, width, height)
    words = []
    for word in line.words:
        text = " ".join(xml_safe(word.text).split())
        if not text or word.bbox is None:
            continue
        word_box = _pixels(word.bbox, width, height)
        words.append(PixelWord(text, word_box, word.confidence))
        box = box.union(word_box)
    if not words:
        return None
    return PixelLine(box, tuple(words), line.confidence)


def _boxed_words(line: Line) -> tuple[Word, ...]:
    """The line's words, each with a box (estimated from the line's where missing)."""
    words = line_words(line)
    if all(w.bbox is not None for w in words):
        return words
    estimated = line_words(dataclasses.replace(line, words=()))
    if len(estimated) != len(words):
        return tuple(w for w in words if w.bbox is not None)
    return tuple(
        w if w.bbox is not None else dataclasses.replace(e, confidence=w.confidence)
        for w, e in zip(words, estimated, strict=True)
    )


def _pixels(box: BBox, width: int, height: int) -> PixelBox:
    """A 0..1 box in whole pixels, outward, clipped to the page, at least a pixel wide and
    high (an empty box tells a reader nothing)."""
    x0 = min(width - 1, max(0, math.floor(box[0] * width)))
    y0 = min(height - 1, max(0, math.floor(box[1] * height)))
    x1 = min(width, max(x0 + 1, math.ceil(box[2] * width)))
    y1 = min(height, max(y0 + 1, math.ceil(box[3] * height)))
    return PixelBox(x0, y0, x1, y1)
