"""``Document`` → ``Page``: what a conversion produced, as one typed object.

Built from the pipeline's results (``document_from_result``), so that the CLI's outputs,
``ocrflow.results`` and the Python API hand out the same thing. ``to_dict`` gives plain
JSON-ready data with named keys (blocks as objects); ``from_dict`` reads it back.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ocrflow.document.confidence import page_score
from ocrflow.types import (
    BBox,
    Block,
    BlockLabel,
    DocStatus,
    DocumentResult,
    Figure,
    ImageSize,
    Line,
    PageResult,
    PageStatus,
    Route,
    Word,
)

#: What joins the pages of a document's Markdown (as the Markdown sink joins them).
PAGE_JOINER = "\n\n"


@dataclass(frozen=True, slots=True)
class Page:
    """One page: its Markdown, its blocks in reading order, and how it was read.

    ``size`` is the pixel size of the page as rendered for the engine (``None`` for pages
    no engine read), before any turn or shrink the engine's reader gave the image it sent;
    boxes are fractions of that page, so they do not depend on it. ``rotation`` is
    the turn (degrees clockwise) the engine gave the page to read it; boxes are on the page
    as rendered, before that turn. ``confidence`` (0..1) is ``page_confidence``: how much
    the page's reading can be trusted (``document.confidence``), ``None`` when unknown.
    ``skew`` is the angle (degrees) the printed lines run down to the right on the page as
    the engine read it (after ``rotation``), 0.0 when level or not measured.
    """

    number: int
    markdown: str
    route: Route
    status: PageStatus = PageStatus.OK
    blocks: tuple[Block, ...] = ()
    size: ImageSize | None = None
    rotation: int = 0
    confidence: float | None = None
    reason: str | None = None
    error: str | None = None
    attributes: dict[str, Any] = field(default_factory=dict)
    skew: float = 0.0


@dataclass(frozen=True, slots=True)
class Document:
    """One converted document: its pages and what is known of its source."""

    id: str
    source: str
    status: DocStatus
    pages: tuple[Page, ...] = ()
    page_count: int = 0
    reason: str | None = None
    message: str | None = None
    #: The source's place and hash, the engine, the configuration fingerprint (what the
    #: sinks are told: ``rel``, ``content_sha256``, ``created``, ``engine``, ...).
    metadata: dict[str, Any] = field(default_factory=dict)
    attributes: dict[str, Any] = field(default_factory=dict)

    @property
    def markdown(self) -> str:
        """The document's Markdown: its pages' Markdown, a blank line apart."""
        return PAGE_JOINER.join(page.markdown for page in self.pages if page.markdown)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data (named keys throughout)."""
        return {
            "id": self.id,
            "source": self.source,
            "status": str(self.status),
            "page_count": self.page_count,
            "reason": self.reason,
            "message": self.message,
            "metadata": dict(self.metadata),
            "attributes": dict(self.attributes),
            "markdown": self.markdown,
            "pages": [_page_dict(page) for page in self.pages],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Document:
        """The inverse of ``to_dict`` (its ``markdown`` is recomputed, not read)."""
        return cls(
            str(data["id"]),
            str(data.get("source", "")),
            DocStatus(data.get("status", DocStatus.OK)),
            tuple(_page_from_dict(page) for page in data.get("pages") or ()),
            int(data.get("page_count", 0)),
            data.get("reason"),
            data.get("message"),
            dict(data.get("metadata") or {}),
            dict(data.get("attributes") or {}),
        )


FigureMarkdown = Callable[[Figure], str]


def document_from_result(
    result: DocumentResult,
    meta: object | None = None,
    *,
    figure_markdown: FigureMarkdown | None = None,
) -> Document:
    """The ``Document`` of a pipeline result.

    ``meta`` is what is known of the source (a dataclass such as the sinks'
    ``DocumentMeta``, or a mapping). ``figure_markdown`` turns a figure into the Markdown
    that replaces its placeholder in the page and in its block (a link, as each sink
    writes it); without it the placeholders stay.
    """
    return Document(
        result.doc_id,
        result.source,
        result.status,
        tuple(page_from_result(p, figure_markdown) for p in sorted(result.pages, key=_number)),
        result.page_count,
        result.reason,
        result.message,
        _metadata(meta),
        dict(result.attributes),
    )


def page_from_result(page: PageResult, figure_markdown: FigureMarkdown | None = None) -> Page:
    """The ``Page`` of one page result (see ``document_from_result``)."""
    text, blocks = page.text, page.blocks
    if figure_markdown is not None and page.figures:
        links = {f.placeholder: figure_markdown(f) for f in page.figures}
        text = _with_links(text, links)
        blocks = _linked(blocks, links)
    return Page(
        page.page,
        text.strip(),
        page.route,
        page.status,
        blocks,
        page.image_size,
        int(page.attributes.get("rotation", 0) or 0),
        page_confidence(page),
        page.reason,
        page.error,
        dict(page.attributes),
        float(page.attributes.get("skew", 0.0) or 0.0),
    )


def linked_blocks(page: PageResult, figure_markdown: FigureMarkdown) -> tuple[Block, ...]:
    """The page's blocks with each figure placeholder replaced by ``figure_markdown``."""
    if not page.figures:
        return page.blocks
    return _linked(page.blocks, {f.placeholder: figure_markdown(f) for f in page.figures})


def _linked(blocks: tuple[Block, ...], links: Mapping[str, str]) -> tuple[Block, ...]:
    return tuple(
        dataclasses.replace(b, text=_with_links(b.text, links)) if "<!--" in b.text else b
        for b in blocks
    )


def page_confidence(page: PageResult) -> float | None:
    """The page's confidence, 0..1 (``document.confidence.page_score``: engine scores,
    the text-layer score, a VLM's retries and token logprobs), else ``None``."""
    return page_score(
        str(page.route),
        str(page.status),
        page.attributes,
        attempts=page.attempts,
        blocks=((b.confidence, len(b.text)) for b in page.blocks),
    )


def _with_links(text: str, links: Mapping[str, str]) -> str:
    for placeholder, link in links.items():
        if placeholder in text:
            text = text.replace(placeholder, link)
    return text


def _number(page: PageResult) -> int:
    return page.page


def _metadata(meta: object | None) -> dict[str, Any]:
    if meta is None:
        return {}
    if isinstance(meta, Mapping):
        return dict(meta)
    if dataclasses.is_dataclass(meta) and not isinstance(meta, type):
        return dataclasses.asdict(meta)
    raise TypeError(f"document metadata must be a mapping or a dataclass, not {type(meta)}")


# -- named-key dictionaries (to_dict / from_dict) -------------------------------------------


def block_dict(block: Block) -> dict[str, Any]:
    """A block with named keys (``words`` and ``source_label`` only when present)."""
    data: dict[str, Any] = {
        "label": str(block.label),
        "text": block.text,
        "bbox": _box_list(block.bbox),
        "confidence": block.confidence,
        "lines": [_line_dict(line) for line in block.lines],
    }
    if block.source_label is not None:
        data["source_label"] = block.source_label
    return data


def block_from_dict(data: Mapping[str, Any]) -> Block:
    """The inverse of ``block_dict``."""
    return Block(
        BlockLabel(data["label"]),
        str(data.get("text", "")),
        _box_tuple(data.get("bbox")),
        data.get("confidence"),
        tuple(_line_from_dict(line) for line in data.get("lines") or ()),
        data.get("source_label"),
    )


def _line_dict(line: Line) -> dict[str, Any]:
    data: dict[str, Any] = {
        "text": line.text,
        "bbox": _box_list(line.bbox),
        "confidence": line.confidence,
    }
    if line.words:
        data["words"] = [
            {"text": w.text, "bbox": _box_list(w.bbox), "confidence": w.confidence}
            for w in line.words
        ]
    return data


def _line_from_dict(data: Mapping[str, Any]) -> Line:
    words = tuple(
        Word(str(w.get("text", "")), _box_tuple(w.get("bbox")), w.get("confidence"))
        for w in data.get("words") or ()
    )
    return Line(
        str(data.get("text", "")), _box_tuple(data.get("bbox")), data.get("confidence"), words
    )


def _page_dict(page: Page) -> dict[str, Any]:
    return {
        "number": page.number,
        "markdown": page.markdown,
        "route": str(page.route),
        "status": str(page.status),
        "size": {"width": page.size.width, "height": page.size.height} if page.size else None,
        "rotation": page.rotation,
        "skew": page.skew,
        "confidence": page.confidence,
        "reason": page.reason,
        "error": page.error,
        "attributes": dict(page.attributes),
        "blocks": [block_dict(block) for block in page.blocks],
    }


def _page_from_dict(data: Mapping[str, Any]) -> Page:
    size = data.get("size")
    return Page(
        int(data["number"]),
        str(data.get("markdown", "")),
        Route(data.get("route", Route.NONE)),
        PageStatus(data.get("status", PageStatus.OK)),
        tuple(block_from_dict(block) for block in data.get("blocks") or ()),
        ImageSize(int(size["width"]), int(size["height"])) if size else None,
        int(data.get("rotation", 0)),
        data.get("confidence"),
        data.get("reason"),
        data.get("error"),
        dict(data.get("attributes") or {}),
        float(data.get("skew", 0.0) or 0.0),
    )


def _box_list(box: BBox | None) -> list[float] | None:
    return None if box is None else list(box)


def _box_tuple(value: Sequence[float] | None) -> BBox | None:
    if not value:
        return None
    x0, y0, x1, y1 = (float(v) for v in value)
    return (x0, y0, x1, y1)
