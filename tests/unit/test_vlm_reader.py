"""The VLM attempt policy, against a scripted in-process engine (no HTTP).

Each test scripts what the engine answers, call by call, and checks what the reader did:
which requests it sent (temperatures, image sizes, deadlines), how many attempts it spent,
and where the page's text came from in the end.
"""

from __future__ import annotations

import asyncio
import io
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from ocrflow.errors import EngineError, EngineRejected, EngineUnavailable
from ocrflow.readers.policy import AttemptPolicy, TransportPolicy
from ocrflow.readers.vlm import VlmReader
from ocrflow.recipes.deepseek import DeepseekRecipe
from ocrflow.recipes.olmocr import TEMPERATURES, OlmocrRecipe
from ocrflow.render.jobs import RenderedPage
from ocrflow.types import EngineReply, PageImage, PageKey, PageRequest, PageStatus, Route

FRONT = (
    "---\nprimary_language: en\nis_rotation_valid: {valid}\nrotation_correction: {turn}\n"
    "is_table: false\nis_diagram: false\n---\n"
)
#: Fast backoff so that retry loops take milliseconds.
QUICK = TransportPolicy(base_s=0.001, cap_s=0.01, page_deadline_s=5.0, request_timeout_s=1.0)

#: One scripted answer: a reply, an exception to raise, or a coroutine function to await.
Step = EngineReply | Exception | Callable[[], Any]


def good(text: str = "The page text, read well.", turn: int = 0) -> EngineReply:
    """A well-formed olmOCR reply (turned pages say so in the front matter)."""
    front = FRONT.format(valid="false" if turn else "true", turn=turn)
    return EngineReply(text=front + text, finish_reason="stop", tokens_in=10, tokens_out=5)


def garbage() -> EngineReply:
    """A reply without front matter: the recipe raises ``ParseError``."""
    return EngineReply(text="#$%& noise without any structure", finish_reason="stop")


@dataclass
class ScriptedEngine:
    """Answers ``infer`` from a script; the last step repeats once the script runs out."""

    script: list[Step]
    name: str = "scripted"
    image_encoding: str = "png"
    requests: list[PageRequest] = field(default_factory=list)

    async def infer(self, request: PageRequest) -> EngineReply:
        self.requests.append(request)
        step = self.script[min(len(self.requests) - 1, len(self.script) - 1)]
        if isinstance(step, Exception):
            raise step
        if isinstance(step, EngineReply):
            return step
        return await step()

    async def aclose(self) -> None:
        pass

    @property
    def temperatures(self) -> list[float]:
        return [r.temperature for r in self.requests]

    @property
    def sizes(self) -> list[tuple[int, int]]:
        return [(r.image.width, r.image.height) for r in self.requests]


@dataclass
class TimedEngine(ScriptedEngine):
    """A scripted engine that times its own requests, like ``OpenAIEngine``."""

    request_timeout_s: float = 0.05


def png(width: int = 1000, height: int = 1288) -> PageImage:
    """A real PNG page image (the reader decodes it to shrink or turn it)."""
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), "white").save(buffer, format="PNG", compress_level=1)
    return PageImage(buffer.getvalue(), width, height, "png")


def page(text: str | None = None, text_ok: bool = False) -> RenderedPage:
    return RenderedPage(3, image=png(), text=text, text_ok=text_ok)


def read(
    engine: ScriptedEngine,
    tmp_path: Path,
    *,
    rendered: RenderedPage | None = None,
    transport: TransportPolicy = QUICK,
    fallback: ScriptedEngine | None = None,
) -> Any:
    """Read one page with ``engine``; returns the page result."""
    reader = VlmReader(
        engine,  # type: ignore[arg-type]
        OlmocrRecipe(),
        transport=transport,
        attempts=AttemptPolicy(),
        fallback_engine=(lambda: fallback) if fallback is not None else None,  # type: ignore[arg-type,return-value]
        seed=1,
    )

    async def go() -> Any:
        try:
            return await reader.read(rendered or page(), PageKey("doc", 3))
        finally:
            await reader.aclose()

    return asyncio.run(go())


# -- transient failures ------------------------------------------------------------------
def test_transient_errors_do_not_consume_attempts(tmp_path: Path) -> None:
    busy = EngineUnavailable("overloaded (429)")
    engine = ScriptedEngine([busy, busy, busy, good()])
    result = read(engine, tmp_path)
    assert result.route is Route.ENGINE
    assert result.attempts == 1
    assert result.attributes["transient_retries"] == 3
    assert engine.temperatures == [TEMPERATURES[0]] * 4


def test_transient_errors_stop_at_the_deadline(tmp_path: Path) -> None:
    engine = ScriptedEngine([EngineUnavailable("connection refused")])
    transport = TransportPolicy(base_s=0.01, cap_s=0.05, page_deadline_s=0.4)
    started = time.monotonic()
    result = read(engine, tmp_path, transport=transport)
    elapsed = time.monotonic() - started
    assert result.route is Route.FALLBACK
    assert result.status is PageStatus.FAILED  # no text layer, no fallback engine
    assert "deadline" in (result.error or "")
    assert 0.4 <= elapsed < 1.5
    assert 0.4 <= result.attributes["elapsed_s"] < 1.5
    assert len(engine.requests) >= 3
    assert result.attempts == 0  # transient failures consumed no attempt


def test_every_request_carries_the_page_deadline(tmp_path: Path) -> None:
    engine = ScriptedEngine([EngineUnavailable("busy"), garbage(), good()])
    before = time.monotonic()
    read(engine, tmp_path)
    deadlines = {r.deadline for r in engine.requests}
    assert len(deadlines) == 1
    (deadline,) = deadlines
    assert deadline is not None
    assert before + QUICK.page_deadline_s <= deadline <= time.monotonic() + QUICK.page_deadline_s


def test_a_hung_request_times_out_and_is_retried(tmp_path: Path) -> None:
    async def hang() -> EngineReply:
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")

    engine = ScriptedEngine([hang, good()])
    transport = TransportPolicy(base_s=0.001, cap_s=0.01, page_deadline_s=5, request_timeout_s=0.1)
    result = read(engine, tmp_path, transport=transport)
    assert result.route is Route.ENGINE
    assert result.attributes["transient_retries"] == 1
    assert len(engine.requests) == 2


def test_an_engine_that_times_its_requests_may_queue_a_page(tmp_path: Path) -> None:
    """Waiting for a slot inside the engine is not the request: only the deadline bounds it."""

    async def queued_then_answered() -> EngineReply:
        await asyncio.sleep(0.3)  # six request timeouts of queueing
        return good()

    engine = TimedEngine([queued_then_answered])
    transport = TransportPolicy(base_s=0.001, cap_s=0.01, page_deadline_s=5, request_timeout_s=0.05)
    result = read(engine, tmp_path, transport=transport)
    assert result.route is Route.ENGINE
    assert result.attributes["transient_retries"] == 0
    assert len(engine.requests) == 1


# -- context overflow --------------------------------------------------------------------
def test_context_overflow_shrinks_the_image_then_gives_up(tmp_path: Path) -> None:
    overflow = EngineRejected("maximum context length", context_overflow=True, status=400)
    engine = ScriptedEngine([overflow])
    result = read(engine, tmp_path)
    policy = AttemptPolicy()
    assert len(engine.requests) == policy.max_shrinks + 1
    longest = [max(size) for size in engine.sizes]
    assert longest == [1288, int(1288 * 0.7), int(int(1288 * 0.7) * 0.7)]
    tokens = [r.max_tokens for r in engine.requests]
    assert tokens == sorted(tokens, reverse=True) and tokens[0] > tokens[-1]
    assert result.route is Route.FALLBACK
    assert "maximum context length" in (result.error or "")


def test_context_overflow_then_success_keeps_the_smaller_image(tmp_path: Path) -> None:
    overflow = EngineRejected("maximum context length", context_overflow=True, status=400)
    engine = ScriptedEngine([overflow, good()])
    result = read(engine, tmp_path)
    assert result.route is Route.ENGINE
    assert result.attributes["shrinks"] == 1
    assert max(engine.sizes[1]) == int(1288 * 0.7)


def test_a_permanent_rejection_falls_back_at_once(tmp_path: Path) -> None:
    engine = ScriptedEngine([EngineRejected("model not found", status=404)])
    result = read(engine, tmp_path, rendered=page("the text layer", text_ok=True))
    assert len(engine.requests) == 1
    assert result.route is Route.FALLBACK
    assert result.text == "the text layer"


# -- content failures --------------------------------------------------------------------
def test_parse_errors_climb_the_temperature_ladder(tmp_path: Path) -> None:
    engine = ScriptedEngine([garbage()])
    result = read(engine, tmp_path)
    assert engine.temperatures == list(TEMPERATURES)
    assert result.route is Route.FALLBACK
    assert result.attempts == len(TEMPERATURES)


def test_a_truncated_reply_counts_as_an_attempt(tmp_path: Path) -> None:
    cut = EngineReply(text=FRONT.format(valid="true", turn=0) + "the the", finish_reason="length")
    engine = ScriptedEngine([cut, garbage(), good()])
    result = read(engine, tmp_path)
    assert result.route is Route.ENGINE
    assert result.attempts == 3
    assert engine.temperatures == list(TEMPERATURES[:3])


# -- rotation ----------------------------------------------------------------------------
def test_a_turned_page_is_rotated_once_and_read_again(tmp_path: Path) -> None:
    engine = ScriptedEngine([good(turn=90), good(turn=90)])
    result = read(engine, tmp_path)
    assert engine.sizes == [(1000, 1288), (1288, 1000)]
    assert result.route is Route.ENGINE
    assert result.attempts == 2
    assert result.attributes["rotation"] == 270  # rotation_correction 90 = 270 clockwise
    # The size recorded is the page as rendered (its boxes' frame), not the turned image.
    assert (result.image_size.width, result.image_size.height) == (1000, 1288)


# -- fallbacks ---------------------------------------------------------------------------
def test_exhausted_falls_back_to_a_good_text_layer(tmp_path: Path) -> None:
    cpu = ScriptedEngine([EngineReply(text="cpu text")])
    result = read(
        ScriptedEngine([garbage()]), tmp_path, rendered=page("native", True), fallback=cpu
    )
    assert (result.route, result.status, result.text) == (Route.FALLBACK, PageStatus.OK, "native")
    assert result.attributes["fallback"] == "text_layer"
    assert cpu.requests == []


def test_exhausted_without_text_layer_uses_the_fallback_engine(tmp_path: Path) -> None:
    cpu = ScriptedEngine([EngineReply(text="cpu text")], name="embedded")
    result = read(ScriptedEngine([garbage()]), tmp_path, fallback=cpu)
    assert (result.route, result.status, result.text) == (Route.FALLBACK, PageStatus.OK, "cpu text")
    assert result.attributes["fallback_engine"] == "embedded"
    assert "front matter" in (result.error or "")
    assert len(cpu.requests) == 1


def test_exhausted_with_nothing_to_fall_back_on_fails_the_page(tmp_path: Path) -> None:
    result = read(ScriptedEngine([garbage()]), tmp_path)
    assert (result.route, result.status, result.text) == (Route.FALLBACK, PageStatus.FAILED, "")
    assert result.error


def test_a_failing_fallback_engine_fails_the_page_with_both_reasons(tmp_path: Path) -> None:
    cpu = ScriptedEngine([EngineError("onnx exploded")])
    result = read(ScriptedEngine([garbage()]), tmp_path, fallback=cpu)
    assert result.status is PageStatus.FAILED
    assert "onnx exploded" in (result.error or "")


@pytest.mark.parametrize("text_ok", [False, True])
def test_a_bad_text_layer_is_not_used_as_fallback(tmp_path: Path, text_ok: bool) -> None:
    rendered = page("garbled layer", text_ok=text_ok)
    result = read(ScriptedEngine([garbage()]), tmp_path, rendered=rendered)
    assert result.status is (PageStatus.OK if text_ok else PageStatus.FAILED)


def test_figures_come_back_as_data_with_a_placeholder_each() -> None:
    reply = EngineReply(
        "<|ref|>text<|/ref|><|det|>[[10, 10, 900, 100]]<|/det|>\nHello\n\n"
        "<|ref|>image<|/ref|><|det|>[[100, 200, 600, 700]]<|/det|>\n"
    )
    engine = ScriptedEngine([reply])
    reader = VlmReader(engine, DeepseekRecipe(), transport=QUICK, seed=1)  # type: ignore[arg-type]
    result = asyncio.run(reader.read(page(), PageKey("doc", 3)))
    assert result.route is Route.ENGINE
    [figure] = result.figures
    assert (figure.page, figure.index, figure.label) == (3, 0, "image")
    assert figure.box == pytest.approx((0.1001, 0.2002, 0.6006, 0.7007), abs=1e-3)
    crop = Image.open(io.BytesIO(figure.png or b""))
    assert crop.size == (500, 645)  # the box of the 1000 x 1288 page, in pixels
    assert result.text.count(figure.placeholder) == 1 and "figures/" not in result.text
    assert result.image_size is not None and result.image_size.width == 1000
    assert engine.requests[0].page_key == "doc:3"  # engines still see a plain string
