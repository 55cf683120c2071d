"""What every recipe is: request-building data plus a parser of the model's reply."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

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


def pick_temperature(temperatures: tuple[float, ...], attempt: int) -> float:
    """The temperature of ``attempt`` (0-based); attempts past the ladder keep the last."""
    if attempt < 0:
        raise ValueError(f"attempt must be >= 0, got {attempt}")
    if not temperatures:
        return 0.0
    return temperatures[min(attempt, len(temperatures) - 1)]


class _RequestData(Protocol):
    """What ``ChatRecipe.build_request`` reads from the recipe it is mixed into."""

    image_first: ClassVar[bool]

    @property
    def prompt(self) -> str | None: ...

    @property
    def temperatures(self) -> tuple[float, ...]: ...

    @property
    def max_tokens(self) -> int: ...

    def extra_body(self, attempt: int) -> dict[str, Any]: ...


class ChatRecipe:
    """The request skeleton of every chat recipe, mixed into its frozen dataclass.

    The recipe states its data (``prompt``, ``temperatures``, ``max_tokens``) and, where
    it differs from the defaults here, ``image_first`` and ``extra_body``; the engine turns
    the request into the chat-completions body.
    """

    __slots__ = ()
    #: Whether the image comes before the prompt in the user message.
    image_first: ClassVar[bool] = True

    def extra_body(self, attempt: int) -> dict[str, Any]:
        """Request fields beyond temperature and max_tokens for ``attempt``: none here."""
        return {}

    def build_request(
        self: _RequestData,
        image: PageImage,
        attempt: int,
        *,
        max_tokens: int | None = None,
        page_key: str = "",
    ) -> PageRequest:
        """The request for attempt ``attempt`` (0-based): the temperature ladder's step, the
        token budget unless ``max_tokens`` overrides it, and the recipe's extra fields."""
        return PageRequest(
            image=image,
            prompt=self.prompt,
            image_first=self.image_first,
            temperature=pick_temperature(self.temperatures, attempt),
            max_tokens=max_tokens or self.max_tokens,
            extra_body=self.extra_body(attempt),
            page_key=page_key,
        )


# -- multi-step recipes --------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class StepRequest:
    """A further request a multi-step recipe asks for one page (a block crop, a region).

    ``key`` names it among the page's steps and is the same in every run (the reader
    checkpoints answers by it); ``kind`` is the recipe's own (a block type).
    """

    key: str
    image: PageImage
    kind: str = ""


@dataclass(frozen=True, slots=True)
class StepAnswer:
    """What became of one step: its text, or ``None`` with the reason it failed."""

    key: str
    text: str | None
    reason: str = ""
    attempts: int = 1


class StepRecipe(Recipe, Protocol):
    """A recipe whose page needs further requests after the first (layout, then crops).

    The reader sends the first request (``build_request`` on ``first_image``) and parses
    it as usual; then it asks ``step_requests`` for the further requests, sends each
    (``build_step_request``, through the same engine, limiter and retries), reads each
    with ``parse_step`` and hands every answer to ``combine``. A step that fails after
    ``step_attempts`` attempts is an answer without text: the page stays converted.
    """

    @property
    def step_attempts(self) -> int: ...

    def first_image(self, image: PageImage) -> PageImage:
        """The image of the first request, made from the page as rendered."""
        ...

    def step_requests(self, page: PageImage, parsed: ParsedPage) -> tuple[StepRequest, ...]:
        """The further requests of a page, from its first read (CPU work: a thread)."""
        ...

    def build_step_request(self, step: StepRequest, attempt: int) -> PageRequest:
        """The request of attempt ``attempt`` (0-based) of one step."""
        ...

    def parse_step(self, step: StepRequest, reply: EngineReply) -> str:
        """The step's text; ``ParseError`` when the reply is unusable."""
        ...

    def combine(self, parsed: ParsedPage, answers: Mapping[str, StepAnswer]) -> ParsedPage:
        """The page from its first read and every step's answer."""
        ...


def is_step_recipe(recipe: object) -> bool:
    """Whether ``recipe`` asks for further requests per page."""
    return callable(getattr(recipe, "step_requests", None))
