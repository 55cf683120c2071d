"""The nouns every stage shares. Imports nothing of ours."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
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
