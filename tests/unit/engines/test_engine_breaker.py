"""The OpenAI engine's circuit breakers against the fakevllm server process: replies that
are not completions are server failures, a server failing everything is named at once,
the engine gives up (``EngineFailing``) once every server failed for too long, and serves
again once a probe gets an answer."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable

import pytest

from ocrflow.engines.breaker import BreakerPolicy
from ocrflow.engines.openai import OpenAIEngine
from ocrflow.errors import EngineFailing, EngineUnavailable
from tests.fakevllm.process import ServerHandle
from tests.unit.engines.openai_helpers import MODEL, request, run, using

#: Opens after 3 failures over 0.3 s, probes every 0.3 s, gives up after 1.5 s.
QUICK = BreakerPolicy(failures=3, window_s=0.3, probe_every_s=0.3, fail_after_s=1.5)


@pytest.mark.parametrize(
    ("fault", "cause"),
    [("no_choices", "a completion without a choice"), ("invalid_json", "not JSON")],
)
def test_a_reply_that_is_not_a_completion_is_a_server_failure(
    server: ServerHandle, faults: Callable[..., object], fault: str, cause: str
) -> None:
    faults(**{fault: 1.0})
    engine = OpenAIEngine([server.base_url], MODEL)
    with pytest.raises(EngineUnavailable, match=cause):
        run(lambda: using(engine, lambda e: e.infer(request(900))))


def test_a_null_content_is_a_reply_without_text(
    server: ServerHandle, faults: Callable[..., object]
) -> None:
    faults(null_content=1.0)
    engine = OpenAIEngine([server.base_url], MODEL)
    reply = run(lambda: using(engine, lambda e: e.infer(request(901))))
    assert reply.text == ""  # the reader makes it a failed attempt (empty_reply)
    assert not engine.replicas[0].breaker.is_open  # the server did answer


async def _keep_asking(engine: OpenAIEngine, first: int, until: float) -> BaseException:
    """What a page does: ask again after each transient failure, until something else."""
    i = first
    while time.monotonic() < until:
        try:
            await engine.infer(request(i))
        except EngineUnavailable:
            await asyncio.sleep(0.02)
        except EngineFailing as exc:
            return exc
        i += 1000
    raise AssertionError("the engine never gave up")


def test_a_server_failing_everything_is_named_at_once_then_given_up(
    server: ServerHandle, faults: Callable[..., object], caplog: pytest.LogCaptureFixture
) -> None:
    faults(fail_500=1.0)
    engine = OpenAIEngine([server.base_url], MODEL, poll_interval_s=0.1, breaker=QUICK)

    async def main(engine: OpenAIEngine) -> tuple[list[BaseException], float]:
        started = time.monotonic()
        pages = [_keep_asking(engine, 910 + i, started + 30) for i in range(6)]
        ends = await asyncio.gather(*pages)
        return ends, time.monotonic() - started

    with caplog.at_level(logging.WARNING, logger="ocrflow.engine"):
        ends, elapsed = run(lambda: using(engine, main))
    assert all(isinstance(end, EngineFailing) for end in ends)  # every page, waiting or not
    assert QUICK.fail_after_s <= elapsed < 10
    assert "HTTP 500" in str(ends[0]) and server.base_url in str(ends[0])
    failing = [r.getMessage() for r in caplog.records if "is failing" in r.getMessage()]
    assert len(failing) == 1 and "HTTP 500: Internal server error" in failing[0]
    # While open, pages waited on our side: a probe every 0.3 s (and what was on the wire
    # when it opened), where six pages asking again every 20 ms sent dozens before.
    at_open = int(re.search(r"(\d+) requests in a row", failing[0]).group(1))  # type: ignore[union-attr]
    while_open = engine.replicas[0].breaker.streak - at_open
    assert at_open >= QUICK.failures and while_open <= elapsed / QUICK.probe_every_s + 6


def test_a_probe_brings_a_recovered_server_back(
    server: ServerHandle, faults: Callable[..., object]
) -> None:
    faults(fail_500=1.0)
    engine = OpenAIEngine([server.base_url], MODEL, poll_interval_s=0.1, breaker=QUICK)

    async def main(engine: OpenAIEngine) -> str:
        await _keep_asking(engine, 950, time.monotonic() + 30)
        with pytest.raises(EngineFailing):
            await engine.infer(request(951))  # given up: refused at once ...
        await asyncio.to_thread(server.set_faults, fail_500=0.0)
        deadline = time.monotonic() + 10
        while True:  # ... except a probe now and then, which now gets an answer
            try:
                reply = await engine.infer(request(952))
                break
            except EngineFailing:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
        second = await engine.infer(request(953))  # closed again: no waiting
        return reply.text + second.text

    text = run(lambda: using(engine, main))
    assert text.count("page-") == 2
    assert not engine.replicas[0].breaker.is_open
