"""What every recipe is: request-building data plus a parser of the model's reply."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from ocrflow.types import Block, EngineReply, PageImage, PageRequest


@dataclass(frozen=True, slots=True)
class Figure:
    """A region the model called a figure; ``bbox`` is (x0, y0, x1, y1) in 0..1 of the page."""

    bbox: tuple[float, float, float, float]
    label: str = "image"
    #: The placeholder in ``ParsedPage.markdown`` that the pipeline replaces with the link.
    placeholder: str = ""


@dataclass(frozen=True, slots=True)
class ParsedPage:
    """A reply turned into Markdown plus what the model said about the page."""

    markdown: str
    #: Degrees clockwise the page must be turned to be upright (0 when it already is).
    rotation: int = 0
    attributes: dict[str, Any] = field(default_factory=dict)
    figures: tuple[Figure, ...] = ()
    #: The page's blocks in the order of ``markdown``: grounded regions with their labels
    #: and boxes (0..1 of the image sent), or the Markdown's structure without boxes. A
    #: figure block's text holds its figure's placeholder.
    blocks: tuple[Block, ...] = ()


class Recipe(Protocol):
    """A model family: how to ask, and how to read the answer."""

    @property
    def name(self) -> str: ...

    @property
    def target_dim(self) -> int:
        """Longest side, in pixels, of the image sent to the model."""
        ...

    @property
    def temperatures(self) -> tuple[float, ...]:
        """Sampling temperature of each attempt; its length is the attempt budget."""
        ...

    @property
    def max_tokens(self) -> int: ...

    @property
    def server_flags(self) -> tuple[str, ...]:
        """Extra ``vllm serve`` flags this model needs, as a plain list."""
        ...

    def build_request(
        self, image: PageImage, attempt: int, *, max_tokens: int | None = None, page_key: str = ""
    ) -> PageRequest:
        """The request for attempt ``attempt`` (0-based) of one page."""
        ...

    def parse(self, reply: EngineReply) -> ParsedPage:
        """Turn a reply into Markdown; raise ``ParseError`` when the output is unusable."""
        ...
