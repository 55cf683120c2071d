"""The nouns every stage shares. Imports nothing of ours."""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any


class Route(enum.StrEnum):
    """Which path produced a page's text."""

    TEXT_LAYER = "text_layer"
    ENGINE = "engine"
    BLANK = "blank"
    FALLBACK = "fallback"
    NONE = "none"


class PageStatus(enum.StrEnum):
    OK = "ok"
    FAILED = "failed"
    SKIPPED = "skipped"


class DocStatus(enum.StrEnum):
    OK = "ok"
    PARTIAL = "partial"
    FAILED = "failed"


class Reason(enum.StrEnum):
    """Why a document or page did not convert fully."""

    NOT_A_DOCUMENT = "not_a_document"
    #: Named as an input but not a regular file (a device, FIFO or socket): never read, as
    #: reading one may never end.
    NOT_A_FILE = "not_a_file"
    ENCRYPTED = "encrypted"
    CORRUPT = "corrupt"
    EMPTY = "empty"
    TOO_LARGE = "too_large"
    TIMEOUT = "timeout"
    RENDER_ERROR = "render_error"
    ENGINE_ERROR = "engine_error"
    PAGE_ERRORS = "page_errors"
    FALLBACK_PAGES = "fallback_pages"
    NO_TEXT_LAYER = "no_text_layer"
    UNREADABLE = "unreadable"
    #: The input names a file or URL the run's access policy does not let it read (a
    #: dataset row naming a server path, a link out of an allowed folder).
    PATH_NOT_ALLOWED = "path_not_allowed"
    #: The engine answered without text (``content`` null or empty) for a page that is not
    #: blank: a failed attempt, never an ``ok`` page with empty text.
    EMPTY_REPLY = "empty_reply"


@dataclass(frozen=True, slots=True)
class PageImage:
    """A rendered page, upright, ready for an engine.

    ``data`` is either raw pixels (``encoding == "raw"``, 8-bit ``mode`` such as "RGB" or "L")
    or an encoded file ("png", "jpeg", "webp").
    """

    data: bytes
    width: int
    height: int
    encoding: str = "png"
    mode: str = "RGB"
    #: Pixels per inch of the page it shows, where known (a PDF page, a scan that says):
    #: Tesseract scales its layout analysis by it, and guesses it otherwise.
    dpi: float | None = None

    @property
    def media_type(self) -> str:
        return {"png": "image/png", "jpeg": "image/jpeg", "webp": "image/webp"}.get(
            self.encoding, "application/octet-stream"
        )


@dataclass(frozen=True, slots=True)
class ImageSize:
    """Pixels of the image an engine was sent (after any shrink or rotation)."""

    width: int
    height: int


@dataclass(frozen=True, slots=True)
class PageKey:
    """Which page of which document; ``str()`` is the ``doc_id:page`` engines log."""

    doc_id: str
    page: int

    def __str__(self) -> str:
        return f"{self.doc_id}:{self.page}"


@dataclass(frozen=True, slots=True)
class Figure:
    """A figure crop of a page, as data: the figure sink writes ``png`` to its file.

    ``box`` is ``(x0, y0, x1, y1)`` as fractions 0..1 of the page image's width and height
    (top-left origin). ``png`` is ``None`` only while a checkpoint is summarised.
    """

    page: int
    index: int
    label: str
    box: tuple[float, float, float, float]
    png: bytes | None = None
    #: What the describe stage said about the figure, as Markdown (a caption, a class, or
    #: a table); ``None`` until then. Sinks put it in the alt text and after the link.
    description: str | None = None

    @property
    def placeholder(self) -> str:
        """The marker the page text holds where this figure goes; sinks put links there."""
        return f"<!--figure:{self.index}-->"


class BlockLabel(enum.StrEnum):
    """What a block of a page is (the document model's vocabulary, docs/architecture.md).

    Engines with their own, richer labels map onto these and keep theirs in
    ``Block.source_label``.
    """

    TEXT = "text"
    TITLE = "title"
    SECTION_HEADER = "section_header"
    LIST_ITEM = "list_item"
    TABLE = "table"
    FIGURE = "figure"
    CAPTION = "caption"
    FORMULA = "formula"
    FOOTNOTE = "footnote"
    PAGE_HEADER = "page_header"
    PAGE_FOOTER = "page_footer"
    CODE = "code"


#: ``(x0, y0, x1, y1)`` as fractions 0..1 of the upright page (the page as rendered, its
#: PDF rotation or EXIF orientation applied), origin at the top left, x0 <= x1, y0 <= y1.
BBox = tuple[float, float, float, float]

#: Decimal places kept of a box coordinate (1/10,000 of the page: 0.03 mm on A4) and of a
#: confidence. Boxes are rounded when made, so a page read back from a checkpoint is equal
#: to the page before it was written.
BOX_DIGITS = 4


@dataclass(frozen=True, slots=True)
class Word:
    """One word where the engine gives words (Tesseract)."""

    text: str
    bbox: BBox | None = None
    confidence: float | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        # Positional: a fraction of the default pickle (field names per object), which
        # matters for blocks crossing from render workers page by page.
        return (Word, (self.text, self.bbox, self.confidence))


@dataclass(frozen=True, slots=True)
class Line:
    """One printed line of a block: its text, box and recognition confidence (0..1)."""

    text: str
    bbox: BBox | None = None
    confidence: float | None = None
    words: tuple[Word, ...] = ()

    def __reduce__(self) -> tuple[Any, ...]:
        return (Line, (self.text, self.bbox, self.confidence, self.words))


@dataclass(frozen=True, slots=True)
class Block:
    """One block of a page in reading order: a paragraph, heading, table, figure, ...

    ``text`` is Markdown (a table as a Markdown or HTML table, a formula as ``$$`` LaTeX, a
    figure as its placeholder); ``bbox`` is ``None`` when the engine gives no box (a
    Markdown-only model); ``confidence`` is 0..1 or ``None``; ``lines`` are the block's
    printed lines where the engine finds them.
    """

    label: BlockLabel
    text: str
    bbox: BBox | None = None
    confidence: float | None = None
    lines: tuple[Line, ...] = ()
    #: The engine's own label when it differs from ``label`` ("sub_title", "Page-header").
    source_label: str | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        fields = (self.label, self.text, self.bbox, self.confidence, self.lines, self.source_label)
        return (Block, fields)


def unit_box(box: tuple[float, float, float, float], width: float, height: float) -> BBox:
    """A box in pixels of a ``width`` x ``height`` image as fractions 0..1 of it: ordered,
    clamped, rounded to ``BOX_DIGITS`` places."""
    x0, x1 = sorted((box[0] / width, box[2] / width))
    y0, y1 = sorted((box[1] / height, box[3] / height))
    return (_unit(x0), _unit(y0), _unit(x1), _unit(y1))


def _unit(value: float) -> float:
    return round(min(1.0, max(0.0, value)), BOX_DIGITS)


def unit_score(value: float | None) -> float | None:
    """A confidence clamped to 0..1 and rounded to ``BOX_DIGITS`` places."""
    return None if value is None else _unit(float(value))


def union_box(boxes: Iterable[BBox | None]) -> BBox | None:
    """The smallest box holding every given box (``None`` when none is given)."""
    known = [b for b in boxes if b is not None]
    if not known:
        return None
    return (
        min(b[0] for b in known),
        min(b[1] for b in known),
        max(b[2] for b in known),
        max(b[3] for b in known),
    )


def box_turned_about_centre(
    box: BBox, angle: float, width: float, height: float, box_height: float | None = None
) -> BBox:
    """Where ``box`` (fractions of a ``width`` x ``height`` page, y down) lies once the
    page's content turns ``angle`` radians counter-clockwise as shown about its centre: its
    centre moves, its width stays, its height is ``box_height`` when given."""
    x0, y0, x1, y1 = box
    cos, sin = math.cos(angle), math.sin(angle)
    dx, dy = ((x0 + x1) / 2 - 0.5) * width, ((y0 + y1) / 2 - 0.5) * height
    cx = 0.5 + (dx * cos + dy * sin) / width
    cy = 0.5 + (dy * cos - dx * sin) / height
    half_w, half_h = (x1 - x0) / 2, (y1 - y0 if box_height is None else box_height) / 2
    return (cx - half_w, cy - half_h, cx + half_w, cy + half_h)


def unturn_box(box: BBox, degrees: int) -> BBox:
    """Where ``box``, measured on a page turned ``degrees`` clockwise, lies on the page
    before it was turned (both as fractions 0..1; ``degrees`` a multiple of 90)."""
    x0, y0, x1, y1 = box
    turn = degrees % 360
    if turn == 90:  # turned clockwise: (x, y) came from (y, 1 - x)
        return (y0, _unit(1 - x1), y1, _unit(1 - x0))
    if turn == 180:
        return (_unit(1 - x1), _unit(1 - y1), _unit(1 - x0), _unit(1 - y0))
    if turn == 270:  # (x, y) came from (1 - y, x)
        return (_unit(1 - y1), x0, _unit(1 - y0), x1)
    return box


def unturn_blocks(blocks: tuple[Block, ...], degrees: int) -> tuple[Block, ...]:
    """``blocks`` measured on a page turned ``degrees`` clockwise, moved back onto the page
    before the turn (boxes of blocks, lines and words)."""
    if not degrees % 360:
        return blocks
    return moved_blocks(blocks, lambda box: unturn_box(box, degrees))


def moved_blocks(blocks: tuple[Block, ...], move: Callable[[BBox], BBox]) -> tuple[Block, ...]:
    """``blocks`` with every box (of blocks, lines and words) replaced by ``move`` of it."""

    def moved(box: BBox | None) -> BBox | None:
        return None if box is None else move(box)

    def line(ln: Line) -> Line:
        words = tuple(replace(w, bbox=moved(w.bbox)) for w in ln.words)
        return replace(ln, bbox=moved(ln.bbox), words=words)

    return tuple(
        replace(b, bbox=moved(b.bbox), lines=tuple(line(ln) for ln in b.lines)) for b in blocks
    )


@dataclass(frozen=True, slots=True)
class PageRequest:
    """One engine call: an image plus what the recipe wants said about it."""

    image: PageImage
    prompt: str | None = None
    image_first: bool = True
    temperature: float = 0.0
    max_tokens: int = 4096
    extra_body: dict[str, Any] = field(default_factory=dict)
    page_key: str = ""
    #: ``time.monotonic()`` by which the page must be done; engines that queue requests
    #: serve earlier deadlines first (a retried page goes ahead of fresh ones).
    deadline: float | None = None


@dataclass(frozen=True, slots=True)
class EngineReply:
    """What an engine answered for one request."""

    text: str
    finish_reason: str = "stop"
    tokens_in: int = 0
    tokens_out: int = 0
    latency_s: float = 0.0
    rotation: int = 0
    engine: str = ""
    attributes: dict[str, Any] = field(default_factory=dict)
    #: The size of the image the request carried (set by the reader before ``parse``).
    image_size: ImageSize | None = None
    #: What the engine found where, in reading order, boxes in 0..1 of the image it was
    #: sent (engines that read pages themselves: embedded, Tesseract).
    blocks: tuple[Block, ...] = ()


@dataclass(frozen=True, slots=True)
class PageResult:
    """The outcome for one page of one document. ``page`` is 1-based."""

    page: int
    text: str
    route: Route
    status: PageStatus = PageStatus.OK
    attempts: int = 0
    error: str | None = None
    reason: str | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    latency_s: float = 0.0
    attributes: dict[str, Any] = field(default_factory=dict)
    #: Figure crops the reader found, in page order; their links are already in ``text``.
    figures: tuple[Figure, ...] = ()
    #: The size of the image the engine read (``None`` for pages no engine read).
    image_size: ImageSize | None = None
    #: The model's Markdown before the canonical clean pass, when that pass changed it
    #: (``text`` is the cleaned one); ``None`` when nothing was cleaned.
    raw_text: str | None = None
    #: The page's blocks in reading order (the order ``text`` is written in), with what
    #: the engine or recipe knows of them: labels, boxes, confidences, lines.
    blocks: tuple[Block, ...] = ()


@dataclass(frozen=True, slots=True)
class DocumentResult:
    """The outcome for one document."""

    doc_id: str
    source: str
    status: DocStatus
    pages: tuple[PageResult, ...] = ()
    page_count: int = 0
    reason: str | None = None
    message: str | None = None
    attributes: dict[str, Any] = field(default_factory=dict)
