"""Read a page with a VLM: recipe-built requests, classified retries, and fallbacks.

Failures are sorted into four kinds (the reference pipeline mixes them up):
transient (backoff, no attempt consumed), fixable (shrink the image or the token budget),
content (next attempt at the recipe's next temperature; a reply without text is one),
permanent (fall back now). ``EngineFailing`` (every server failed for too long) is none of
them: it goes up and stops the run, leaving the page pending.
"""

from __future__ import annotations

import asyncio
import dataclasses
import io
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from PIL import Image

from ocrflow.engines.base import Engine
from ocrflow.errors import EngineError, EngineRejected, EngineUnavailable, ParseError
from ocrflow.readers.plain import fallback_page
from ocrflow.readers.policy import AttemptPolicy, TransportPolicy
from ocrflow.recipes.base import ParsedPage, Recipe
from ocrflow.render.jobs import RenderedPage, decode_image, encode_image
from ocrflow.types import (
    Block,
    BlockLabel,
    EngineReply,
    Figure,
    ImageSize,
    PageImage,
    PageKey,
    PageRequest,
    PageResult,
    Reason,
    Route,
    unit_box,
    unturn_blocks,
)

if TYPE_CHECKING:
    from ocrflow.readers.second_pass import SecondPass

log = logging.getLogger("ocrflow.vlm")


class DeadlinePassed(Exception):
    """The page's deadline passed before an answer came."""


@dataclass
class _Attempts:
    """Mutable state of one page's attempts (local to one ``read`` call)."""

    image: PageImage
    max_tokens: int
    attempt: int = 0
    shrinks: int = 0
    rotations: int = 0
    rotation: int = 0
    transient: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    last_error: str = ""
    #: The reason code of ``last_error`` (``engine_error``, ``empty_reply``).
    last_reason: str = Reason.ENGINE_ERROR
    #: ``time.monotonic()`` when the page's first attempt began.
    started: float = 0.0
    #: The reply the last parsed attempt came from (the second passes read its regions).
    reply: EngineReply | None = None


class VlmReader:
    """Pairs a recipe with an engine; falls back to the text layer or a CPU engine.

    A pure reader: it returns values and writes nothing. Figure crops travel in
    ``PageResult.figures`` as PNG bytes with their boxes; the page text holds a placeholder
    (``<!--figure:i-->``) per figure, which each sink turns into a link of its own.
    """

    def __init__(
        self,
        engine: Engine,
        recipe: Recipe,
        *,
        transport: TransportPolicy | None = None,
        attempts: AttemptPolicy | None = None,
        fallback_engine: Callable[[], Engine] | None = None,
        seed: int | None = None,
        second_pass: SecondPass | None = None,
        first_pass_dim: int | None = None,
    ) -> None:
        self.engine = engine
        self.recipe = recipe
        self.transport = transport or TransportPolicy()
        self.policy = attempts or AttemptPolicy()
        self.image_encoding = engine.image_encoding
        self._fallback_factory = fallback_engine
        self._fallback: Engine | None = None
        self._rng = random.Random(seed)
        #: Region second passes; with them pages arrive rendered at their resolution and
        #: the first read gets them at ``first_pass_dim``.
        self.second_pass = second_pass
        self.first_pass_dim = first_pass_dim

    async def read(self, page: RenderedPage, page_key: PageKey) -> PageResult:
        """The page's Markdown, or a recorded fallback; never raises for engine trouble."""
        assert page.image is not None
        started = time.monotonic()
        state = _Attempts(await self._first_image(page.image), self.recipe.max_tokens)
        state.started = started
        deadline = state.started + self.transport.page_deadline_s
        while state.attempt < len(self.recipe.temperatures):
            try:
                parsed = await self._one_attempt(state, page_key, deadline)
            except DeadlinePassed:
                state.last_error = f"deadline of {self.transport.page_deadline_s:.0f} s passed"
                state.last_reason = Reason.ENGINE_ERROR
                break
            except EngineRejected as exc:
                state.last_error, state.last_reason = str(exc), Reason.ENGINE_ERROR
                if not (exc.context_overflow and await self._shrink(state)):
                    break
                continue
            except (ParseError, _RotateAndRetry) as exc:
                state.last_error = str(exc)
                empty = getattr(exc, "reason", "") == Reason.EMPTY_REPLY
                state.last_reason = Reason.EMPTY_REPLY if empty else Reason.ENGINE_ERROR
                state.attempt += 1
                continue
            if self.second_pass is not None and state.rotation == 0:
                parsed = await self._second_passes(page.image, parsed, state, deadline)
            return await self._success(page, parsed, state)
        return await self._fall_back(page, state)

    async def _first_image(self, image: PageImage) -> PageImage:
        """The image of the first read: the rendered one, shrunk to ``first_pass_dim``."""
        dim = self.first_pass_dim
        if dim is None or max(image.width, image.height) <= dim:
            return image
        return await asyncio.to_thread(_resize, image, dim)

    async def _second_passes(
        self, hires: PageImage, parsed: ParsedPage, state: _Attempts, deadline: float
    ) -> ParsedPage:
        """The region second passes over the accepted read (their requests share the
        page's deadline, backoff and token counts)."""
        assert self.second_pass is not None and state.reply is not None

        async def ask(request: PageRequest) -> EngineReply:
            request = dataclasses.replace(request, deadline=deadline)
            try:
                return await self._call(request, state, deadline)
            except DeadlinePassed:
                raise EngineUnavailable("the page deadline passed in a second pass") from None

        return await self.second_pass.refine(hires, state.reply, parsed, ask)

    async def _one_attempt(
        self, state: _Attempts, page_key: PageKey, deadline: float
    ) -> ParsedPage:
        request = self.recipe.build_request(
            state.image, state.attempt, max_tokens=state.max_tokens, page_key=str(page_key)
        )
        request = dataclasses.replace(request, deadline=deadline)
        reply = await self._call(request, state, deadline)
        if not reply.text.strip():
            # ``content`` null or empty for a page that is not blank: never an ``ok`` page.
            raise ParseError(
                f"the reply has no text (finish_reason {reply.finish_reason})",
                reason=Reason.EMPTY_REPLY,
            )
        reply = dataclasses.replace(reply, image_size=_size(state.image))
        parsed = self.recipe.parse(reply)
        state.reply = reply
        if parsed.rotation % 360 and state.rotations < self.policy.max_rotations:
            await self._rotate(state, parsed.rotation)
            raise _RotateAndRetry(f"model reported the page turned by {parsed.rotation}")
        return parsed

    async def _call(self, request: PageRequest, state: _Attempts, deadline: float) -> EngineReply:
        """One answer, retrying transient failures with backoff until the deadline."""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise DeadlinePassed()
            try:
                async with asyncio.timeout(self._request_budget(left)):
                    reply = await self.engine.infer(request)
            except (EngineUnavailable, TimeoutError) as exc:
                state.transient += 1
                state.last_error = str(exc) or "request timed out"
                pause = self.transport.backoff_s(state.transient, self._rng)
                await asyncio.sleep(min(pause, max(0.0, deadline - time.monotonic())))
                continue
            state.tokens_in += reply.tokens_in
            state.tokens_out += reply.tokens_out
            return reply

    def _request_budget(self, left: float) -> float:
        """How long one ``infer`` call may take.

        An engine that times its own requests (it alone knows when one leaves its queue of
        pages waiting for a slot) gets the rest of the deadline: timing the wait for a slot
        as if it were the request would abandon pages that were merely queued.
        """
        if getattr(self.engine, "request_timeout_s", None) is not None:
            return left
        return min(left, self.transport.request_timeout_s)

    async def _shrink(self, state: _Attempts) -> bool:
        """Make the request fit the context: a smaller image, then fewer output tokens."""
        if state.shrinks >= self.policy.max_shrinks:
            return False
        state.shrinks += 1
        longest = max(state.image.width, state.image.height)
        target = max(self.policy.min_dim, int(longest * self.policy.shrink_factor))
        if target < longest:
            state.image = await asyncio.to_thread(_resize, state.image, target)
        state.max_tokens = max(256, int(state.max_tokens * self.policy.shrink_factor))
        return True

    async def _rotate(self, state: _Attempts, degrees: int) -> None:
        state.rotations += 1
        state.rotation = (state.rotation + degrees) % 360
        state.image = await asyncio.to_thread(_rotate, state.image, degrees)

    async def _success(
        self, page: RenderedPage, parsed: ParsedPage, state: _Attempts
    ) -> PageResult:
        markdown, figures, blocks = await asyncio.to_thread(
            _crop_figures, page.page, parsed, state.image
        )
        attributes = {
            **parsed.attributes,
            "rotation": state.rotation,
            "transient_retries": state.transient,
            "shrinks": state.shrinks,
            "elapsed_s": round(time.monotonic() - state.started, 3),
        }
        return PageResult(
            page.page,
            markdown,
            Route.ENGINE,
            attempts=state.attempt + 1,
            tokens_in=state.tokens_in,
            tokens_out=state.tokens_out,
            attributes=attributes,
            figures=figures,
            image_size=_size(state.image),
            # Boxes on the page as rendered, before the turns the model asked for.
            blocks=unturn_blocks(blocks, state.rotation),
        )

    async def _fall_back(self, page: RenderedPage, state: _Attempts) -> PageResult:
        error = state.last_error or "attempts exhausted"
        extra = {
            "tokens_in": state.tokens_in,
            "tokens_out": state.tokens_out,
            "transient_retries": state.transient,
            # Time spent on the VLM (what the page deadline bounds), before falling back.
            "elapsed_s": round(time.monotonic() - state.started, 3),
        }
        why = state.last_reason
        if page.text_ok and page.text:
            return fallback_page(page, error, attempts=state.attempt, reason=why, **extra)
        engine = self._fallback_engine()
        if engine is not None:
            try:
                reply = await engine.infer(PageRequest(image=state.image))
            except EngineError as exc:
                error = f"{error}; fallback engine failed too: {exc}"
            else:
                cpu_page = dataclasses.replace(
                    page, text=reply.text, text_ok=True, text_blocks=reply.blocks
                )
                return fallback_page(
                    cpu_page, error, attempts=state.attempt, reason=why,
                    fallback_engine=engine.name, **extra,
                )  # fmt: skip
        unread = dataclasses.replace(page, text=None)
        return fallback_page(unread, error, attempts=state.attempt, reason=why, **extra)

    def _fallback_engine(self) -> Engine | None:
        if self._fallback is None and self._fallback_factory is not None:
            self._fallback = self._fallback_factory()
        return self._fallback

    async def aclose(self) -> None:
        """Close the fallback engine if one was made."""
        if self._fallback is not None:
            await self._fallback.aclose()


class _RotateAndRetry(Exception):
    pass


def _resize(image: PageImage, longest: int) -> PageImage:
    picture = decode_image(image)
    picture.thumbnail((longest, longest), Image.Resampling.LANCZOS)
    return encode_image(picture, image.encoding)


def _rotate(image: PageImage, degrees: int) -> PageImage:
    turned = decode_image(image).rotate(-degrees, expand=True)
    return encode_image(turned, image.encoding)


def _size(image: PageImage) -> ImageSize:
    return ImageSize(image.width, image.height)


def _crop_figures(
    page: int, parsed: ParsedPage, image: PageImage
) -> tuple[str, tuple[Figure, ...], tuple[Block, ...]]:
    """The page's Markdown with one placeholder per figure, the figures as PNG crops, and
    the page's blocks with the same placeholders.

    A recipe's own placeholder becomes ``Figure.placeholder``; a figure without one is
    appended at the end (and to the blocks, as a figure block), so every figure has
    exactly one placeholder in the text.
    """
    markdown, blocks = parsed.markdown, parsed.blocks
    if not parsed.figures:
        return markdown, (), blocks
    picture = decode_image(image)
    figures = []
    for index, region in enumerate(parsed.figures):
        x0, y0, x1, y1 = (max(0.0, min(1.0, v)) for v in region.bbox)
        figure = Figure(
            page, index, region.label, (x0, y0, x1, y1), _crop_png(picture, region.bbox)
        )
        if region.placeholder and region.placeholder in markdown:
            markdown = markdown.replace(region.placeholder, figure.placeholder)
            blocks = _renamed(blocks, region.placeholder, figure.placeholder)
        else:
            markdown = f"{markdown}\n\n{figure.placeholder}"
            alone = Block(BlockLabel.FIGURE, figure.placeholder, unit_box(figure.box, 1.0, 1.0))
            blocks = (*blocks, alone) if blocks else ()
        figures.append(figure)
    return markdown, tuple(figures), blocks


def _renamed(blocks: tuple[Block, ...], old: str, new: str) -> tuple[Block, ...]:
    if old == new:
        return blocks
    return tuple(
        dataclasses.replace(b, text=b.text.replace(old, new)) if old in b.text else b
        for b in blocks
    )


def _crop_png(picture: Image.Image, bbox: tuple[float, float, float, float]) -> bytes:
    x0, y0, x1, y1 = (max(0.0, min(1.0, v)) for v in bbox)
    box = (
        int(x0 * picture.width),
        int(y0 * picture.height),
        max(int(x1 * picture.width), int(x0 * picture.width) + 1),
        max(int(y1 * picture.height), int(y0 * picture.height) + 1),
    )
    buffer = io.BytesIO()
    picture.crop(box).save(buffer, format="PNG")
    return buffer.getvalue()
