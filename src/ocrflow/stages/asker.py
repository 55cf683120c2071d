"""Ask a VLM about one figure, with the same classified retries as a page read.

Transient failures (unreachable, 429/5xx, a timeout) back off and do not use an attempt;
a context overflow shrinks the crop; an empty or cut-off answer is tried again at the next
temperature; any other refusal is final. Returns a ``FigureResult`` either way (status
``ok`` or ``failed``), never raises for engine trouble.
"""

from __future__ import annotations

import asyncio
import io
import random
import time
from dataclasses import dataclass

from PIL import Image

from ocrflow.engines.base import Engine
from ocrflow.errors import EngineRejected
from ocrflow.readers.backoff import DeadlinePassed, infer_with_backoff
from ocrflow.readers.policy import TransportPolicy
from ocrflow.stages.answers import answer_markdown
from ocrflow.stages.figure_items import FigureResult
from ocrflow.types import EngineReply, PageImage, PageRequest

TEMPERATURES = (0.0, 0.2, 0.5)
MIN_SIDE = 64


@dataclass(frozen=True, slots=True)
class AskSettings:
    """How every figure is asked."""

    task: str
    prompt: str
    max_tokens: int = 1024
    deadline_s: float = 600.0
    request_timeout_s: float = 180.0
    temperatures: tuple[float, ...] = TEMPERATURES
    max_shrinks: int = 2


@dataclass
class _State:
    image: PageImage
    attempt: int = 0
    shrinks: int = 0
    transient: int = 0
    #: Why the last try failed (a transient failure, a refusal, an unusable answer).
    last_error: str = ""


class FigureAsker:
    """Sends figure crops to an engine; one instance per describe run."""

    def __init__(self, engine: Engine, settings: AskSettings, *, seed: int | None = None) -> None:
        self.engine = engine
        self.settings = settings
        self.transport = TransportPolicy()
        self._rng = random.Random(seed)

    async def ask(self, doc_id: str, page: int, index: int, png: bytes) -> FigureResult:
        """The answer about one figure (``status`` tells whether there is one)."""
        started = time.monotonic()
        deadline = started + self.settings.deadline_s
        state = _State(await asyncio.to_thread(_png_image, png))
        base = {"doc_id": doc_id, "page": page, "index": index, "task": self.settings.task}
        while state.attempt < len(self.settings.temperatures):
            try:
                reply = await self._call(state, deadline)
            except EngineRejected as exc:
                state.last_error = str(exc)
                if exc.context_overflow and await self._shrink(state):
                    continue
                break
            except DeadlinePassed:
                state.last_error = f"deadline of {self.settings.deadline_s:.0f} s passed"
                break
            if reply.finish_reason == "stop" and reply.text.strip():
                return FigureResult(
                    **base,
                    text=reply.text,
                    markdown=answer_markdown(self.settings.task, reply.text),
                    attempts=state.attempt + 1,
                    tokens_in=reply.tokens_in,
                    tokens_out=reply.tokens_out,
                    latency_s=round(time.monotonic() - started, 3),
                )
            state.last_error = f"unusable answer (finish_reason {reply.finish_reason})"
            state.attempt += 1
        return FigureResult(
            **base, status="failed", error=state.last_error or "attempts exhausted",
            attempts=state.attempt, latency_s=round(time.monotonic() - started, 3),
        )  # fmt: skip

    async def _call(self, state: _State, deadline: float) -> EngineReply:
        """One answer; transient failures back off until the deadline (``DeadlinePassed``)."""
        request = PageRequest(
            image=state.image,
            prompt=self.settings.prompt,
            image_first=True,
            temperature=self.settings.temperatures[state.attempt],
            max_tokens=self.settings.max_tokens,
            deadline=deadline,
        )
        return await infer_with_backoff(
            self.engine, request, deadline, state, transport=self.transport, rng=self._rng,
            request_timeout_s=self.settings.request_timeout_s,
        )  # fmt: skip

    async def _shrink(self, state: _State) -> bool:
        longest = max(state.image.width, state.image.height)
        if state.shrinks >= self.settings.max_shrinks or longest <= MIN_SIDE:
            return False
        state.shrinks += 1
        state.image = await asyncio.to_thread(_resized, state.image, max(MIN_SIDE, longest // 2))
        return True


def _png_image(png: bytes) -> PageImage:
    """The crop as the engine takes it: its PNG bytes as stored (only the header is read)."""
    with Image.open(io.BytesIO(png)) as picture:
        width, height = picture.size
    return PageImage(png, width, height, "png")


def _resized(image: PageImage, longest: int) -> PageImage:
    with Image.open(io.BytesIO(image.data)) as picture:
        picture.thumbnail((longest, longest), Image.Resampling.LANCZOS)
        buffer = io.BytesIO()
        picture.save(buffer, format="PNG")
        return PageImage(buffer.getvalue(), picture.width, picture.height, "png")
