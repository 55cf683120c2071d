"""The one retry helper (``readers.backoff``) and the figure asker that uses it."""

from __future__ import annotations

import asyncio
import io
import random
import time
from dataclasses import dataclass, field

import pytest
from PIL import Image

from ocrflow.errors import EngineRejected, EngineUnavailable
from ocrflow.readers.backoff import DeadlinePassed, infer_with_backoff, request_budget
from ocrflow.readers.policy import TransportPolicy
from ocrflow.stages.asker import AskSettings, FigureAsker
from ocrflow.types import EngineReply, PageImage, PageRequest

FAST = TransportPolicy(base_s=0.001, cap_s=0.005, request_timeout_s=5.0)


@dataclass
class _Flaky:
    """An engine that fails ``failures`` times (``error``, or hangs when it is None), then
    answers ``text``; it records every request."""

    failures: int
    error: Exception | None = field(default_factory=lambda: EngineUnavailable("503 busy"))
    text: str = "a chart of rainfall"
    requests: list[PageRequest] = field(default_factory=list)

    async def infer(self, request: PageRequest) -> EngineReply:
        self.requests.append(request)
        if len(self.requests) <= self.failures:
            if self.error is None:
                await asyncio.sleep(10)
            else:
                raise self.error
        return EngineReply(self.text, tokens_in=7, tokens_out=3)

    async def aclose(self) -> None:
        pass


@dataclass
class _Count:
    transient: int = 0
    last_error: str = ""


def _request() -> PageRequest:
    return PageRequest(image=PageImage(b"", 1, 1, "png"), prompt="describe")


def _call(engine: _Flaky, state: _Count, deadline_s: float, **kw: float) -> EngineReply:
    deadline = time.monotonic() + deadline_s
    return asyncio.run(
        infer_with_backoff(
            engine, _request(), deadline, state, transport=FAST, rng=random.Random(1), **kw
        )
    )


def test_transient_failures_are_retried_and_counted() -> None:
    engine, state = _Flaky(failures=3), _Count()
    reply = _call(engine, state, 5.0)
    assert reply.text == "a chart of rainfall"
    assert len(engine.requests) == 4
    assert state.transient == 3 and state.last_error == "503 busy"


def test_the_count_carries_across_calls() -> None:
    """Backoff grows with the page's failures, not only this request's."""
    state = _Count(transient=5)
    _call(_Flaky(failures=1), state, 5.0)
    assert state.transient == 6


def test_a_hung_request_times_out_and_is_retried() -> None:
    engine, state = _Flaky(failures=1, error=None), _Count()
    started = time.monotonic()
    reply = _call(engine, state, 5.0, request_timeout_s=0.05)
    assert reply.text and len(engine.requests) == 2
    assert state.last_error == "request timed out"
    assert time.monotonic() - started < 2.0


def test_the_deadline_ends_the_retries() -> None:
    engine, state = _Flaky(failures=10**6), _Count()
    with pytest.raises(DeadlinePassed):
        _call(engine, state, 0.1)
    assert state.transient >= 1


def test_a_refusal_goes_up_at_once() -> None:
    engine, state = (
        _Flaky(failures=1, error=EngineRejected("too long", context_overflow=True)),
        _Count(),
    )
    with pytest.raises(EngineRejected):
        _call(engine, state, 5.0)
    assert len(engine.requests) == 1 and state.transient == 0


def test_an_engine_that_times_its_own_requests_gets_the_whole_deadline() -> None:
    class Timed(_Flaky):
        request_timeout_s = 30.0

    assert request_budget(_Flaky(0), left=100.0, request_timeout_s=5.0) == 5.0
    assert request_budget(_Flaky(0), left=2.0, request_timeout_s=5.0) == 2.0
    assert request_budget(Timed(0), left=100.0, request_timeout_s=5.0) == 100.0


def _png(size: int = 200) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (size, size), "white").save(buffer, format="PNG")
    return buffer.getvalue()


def _asker(engine: _Flaky, deadline_s: float = 600.0) -> FigureAsker:
    asker = FigureAsker(engine, AskSettings(task="caption", prompt="?", deadline_s=deadline_s))
    asker.transport = FAST
    return asker


def test_the_asker_rides_out_transient_failures_without_using_an_attempt() -> None:
    engine = _Flaky(failures=2)
    result = asyncio.run(_asker(engine).ask("doc", 1, 0, _png()))
    assert result.status == "ok" and result.text == "a chart of rainfall"
    assert result.attempts == 1 and len(engine.requests) == 3
    assert result.tokens_in == 7 and result.tokens_out == 3


def test_the_asker_fails_the_figure_when_its_deadline_passes() -> None:
    engine = _Flaky(failures=10**6)
    result = asyncio.run(_asker(engine, deadline_s=0.1).ask("doc", 1, 0, _png()))
    assert result.status == "failed"
    assert result.error == "deadline of 0 s passed"


def test_the_asker_shrinks_the_crop_on_a_context_overflow() -> None:
    engine = _Flaky(failures=1, error=EngineRejected("too long", context_overflow=True))
    result = asyncio.run(_asker(engine).ask("doc", 1, 0, _png(400)))
    assert result.status == "ok"
    first, second = engine.requests
    assert (first.image.width, second.image.width) == (400, 200)
