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
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from PIL import Image

from ocrflow.engines.base import Engine
from ocrflow.errors import EngineError, EngineRejected, EngineUnavailable, ParseError
from ocrflow.readers.backoff import DeadlinePassed, infer_with_backoff
from ocrflow.readers.figure_crops import crop_figures
from ocrflow.readers.plain import fallback_page
from ocrflow.readers.policy import AttemptPolicy, TransportPolicy
from ocrflow.readers.steps import PageSteps, StepStore, run_steps
from ocrflow.recipes.base import ParsedPage, Recipe, is_step_recipe
from ocrflow.render.jobs import RenderedPage, decode_image, encode_image
from ocrflow.types import (
    EngineReply,
    ImageSize,
    PageImage,
    PageKey,
    PageRequest,
    PageResult,
    Reason,
    Route,
    unturn_blocks,
)

if TYPE_CHECKING:
    from ocrflow.readers.second_pass import SecondPass

log = logging.getLogger("ocrflow.vlm")


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
    #: The temperature of the last attempt sent, and why each failed attempt failed
    #: (``ParseError.reason``: truncated, repetition, parse_error, empty_reply; rotation):
    #: what the page's confidence is scored from (``document.confidence``).
    temperature: float = 0.0
    failures: list[str] = dataclasses.field(default_factory=list)


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
        steps: StepStore | None = None,
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
        #: Multi-step recipes (``readers/steps.py``): where their steps are checkpointed.
        self.steps = steps
        self._multi = is_step_recipe(recipe)

    async def read(self, page: RenderedPage, page_key: PageKey) -> PageResult:
        """The page's Markdown, or a recorded fallback; never raises for engine trouble."""
        assert page.image is not None
        started = time.monotonic()
        # Pages with further requests (a multi-step recipe's, or region second passes)
        # checkpoint their first read and each further answer (``readers/steps.py``).
        further = self._multi or self.second_pass is not None
        steps = await PageSteps.open(self.steps, page_key) if further else None
        state = _Attempts(await self._first_image(page.image), self.recipe.max_tokens)
        state.started = started
        deadline = state.started + self.transport.page_deadline_s
        while state.attempt < len(self.recipe.temperatures):
            try:
                parsed = await self._one_attempt(state, page_key, deadline, steps)
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
                state.failures.append(getattr(exc, "reason", None) or "rotation")
                state.attempt += 1
                continue
            if self.second_pass is not None and state.rotation == 0:
                parsed = await self._second_passes(page.image, parsed, state, deadline, steps)
            if steps is not None and self._multi:
                ask = self._asker(state, deadline)
                parsed = await run_steps(self.recipe, page.image, parsed, steps, ask)  # type: ignore[arg-type]
            return await self._success(page, parsed, state)
        return await self._fall_back(page, state)

    async def _first_image(self, image: PageImage) -> PageImage:
        """The image of the first read: the rendered one, shrunk to ``first_pass_dim``."""
        if self._multi:
            return await asyncio.to_thread(self.recipe.first_image, image)  # type: ignore[attr-defined]
        dim = self.first_pass_dim
        if dim is None or max(image.width, image.height) <= dim:
            return image
        return await asyncio.to_thread(_resize, image, dim)

    async def _second_passes(
        self,
        hires: PageImage,
        parsed: ParsedPage,
        state: _Attempts,
        deadline: float,
        steps: PageSteps | None,
    ) -> ParsedPage:
        """The region second passes over the accepted read (their requests share the
        page's deadline, backoff and token counts; their answers are checkpointed)."""
        assert self.second_pass is not None and state.reply is not None
        ask = self._asker(state, deadline)
        return await self.second_pass.refine(hires, state.reply, parsed, ask, steps)

    def _asker(
        self, state: _Attempts, deadline: float
    ) -> Callable[[PageRequest], Awaitable[EngineReply]]:
        """A page's further requests (second passes, steps): its deadline, backoff and token
        counts; a passed deadline is ``EngineUnavailable``."""

        async def ask(request: PageRequest) -> EngineReply:
            request = dataclasses.replace(request, deadline=deadline)
            try:
                return await self._call(request, state, deadline)
            except DeadlinePassed:
                raise EngineUnavailable("the page deadline passed in a further request") from None

        return ask

    async def _one_attempt(
        self, state: _Attempts, page_key: PageKey, deadline: float, steps: PageSteps | None
    ) -> ParsedPage:
        request = self.recipe.build_request(
            state.image, state.attempt, max_tokens=state.max_tokens, page_key=str(page_key)
        )
        request = dataclasses.replace(request, deadline=deadline)
        state.temperature = request.temperature
        # A multi-step page whose first read was checkpointed by a run that was stopped.
        resumed = steps.first_reply() if steps is not None and state.attempt == 0 else None
        reply = resumed or await self._call(request, state, deadline)
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
        if steps is not None and resumed is None:
            await steps.save_first(reply)  # written before any step is sent
        return parsed

    async def _call(self, request: PageRequest, state: _Attempts, deadline: float) -> EngineReply:
        """One answer, retrying transient failures with backoff until the deadline."""
        reply = await infer_with_backoff(
            self.engine, request, deadline, state, transport=self.transport, rng=self._rng
        )
        state.tokens_in += reply.tokens_in
        state.tokens_out += reply.tokens_out
        return reply

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
        # A multi-step recipe's first image is not the page (MinerU's is stretched square):
        # its figures are cut from the page as rendered.
        source = page.image if self._multi and page.image is not None else state.image
        markdown, figures, blocks = await asyncio.to_thread(crop_figures, page.page, parsed, source)
        attributes = {
            **parsed.attributes,
            "rotation": state.rotation,
            "transient_retries": state.transient,
            "shrinks": state.shrinks,
            "elapsed_s": round(time.monotonic() - state.started, 3),
            **self._scored(state),
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
            # The page as rendered (not the turned or shrunk image sent): its boxes are on it.
            image_size=_size(page.image),
            # Boxes on the page as rendered, before the turns the model asked for.
            blocks=unturn_blocks(blocks, state.rotation),
        )

    async def _fall_back(self, page: RenderedPage, state: _Attempts) -> PageResult:
        error = state.last_error or "attempts exhausted"
        tokens_in, tokens_out = state.tokens_in, state.tokens_out
        extra: dict[str, object] = {
            "transient_retries": state.transient,
            # Time spent on the VLM (what the page deadline bounds), before falling back.
            "elapsed_s": round(time.monotonic() - state.started, 3),
            "retry_reasons": state.failures,
        }
        why = state.last_reason
        if page.text_ok and page.text:
            return fallback_page(
                page, error, attempts=state.attempt, reason=why,
                tokens_in=tokens_in, tokens_out=tokens_out, **extra,
            )  # fmt: skip
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
                    tokens_in=tokens_in, tokens_out=tokens_out,
                    fallback_engine=engine.name, **extra,
                )  # fmt: skip
        unread = dataclasses.replace(page, text=None)
        return fallback_page(
            unread, error, attempts=state.attempt, reason=why,
            tokens_in=tokens_in, tokens_out=tokens_out, **extra,
        )  # fmt: skip

    def _scored(self, state: _Attempts) -> dict[str, object]:
        """What the page's confidence is scored from: the accepted reply's finish reason
        and token probability, its temperature above the ladder's first, the failures."""
        first = self.recipe.temperatures[0] if self.recipe.temperatures else 0.0
        reply = state.reply
        scored: dict[str, object] = {
            "finish_reason": reply.finish_reason if reply else None,
            "temperature": state.temperature,
            "temperature_climb": round(max(0.0, state.temperature - first), 3),
            "retry_reasons": state.failures,
        }
        if reply is not None and "mean_token_prob" in reply.attributes:
            scored["mean_token_prob"] = reply.attributes["mean_token_prob"]
        return scored

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


def _size(image: PageImage | None) -> ImageSize | None:
    return ImageSize(image.width, image.height) if image is not None else None
