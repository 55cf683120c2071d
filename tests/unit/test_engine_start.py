"""A run renders while its engine starts: the reader's gate holds pages until the engine
serves, and a failed start stops the work with its own error (``executors.worker``)."""

from __future__ import annotations

import asyncio

import pytest

from ocrflow.errors import EngineUnavailable
from ocrflow.executors.worker import _unless_start_fails
from ocrflow.pipeline.documents import CHUNK_PAGES, render_chunks
from ocrflow.readers.ready_gate import ReadyGate
from ocrflow.render.jobs import RenderedPage
from ocrflow.types import PageKey, PageResult, Route


class Recorder:
    """A page reader that notes when each page reached it."""

    image_encoding = "png"

    def __init__(self) -> None:
        self.read_pages: list[int] = []
        self.closed = False

    async def read(self, page: RenderedPage, page_key: PageKey) -> PageResult:
        self.read_pages.append(page.page)
        return PageResult(page.page, "text", Route.ENGINE)

    async def aclose(self) -> None:
        self.closed = True


def test_the_gate_holds_pages_until_the_engine_serves() -> None:
    async def scenario() -> tuple[list[int], list[int], bool]:
        opened = asyncio.Event()
        ready = asyncio.get_running_loop().create_task(opened.wait())
        inner = Recorder()
        gate = ReadyGate(inner, ready)  # type: ignore[arg-type]
        reads = [asyncio.create_task(gate.read(RenderedPage(n), PageKey("doc", n))) for n in (1, 2)]
        await asyncio.sleep(0.05)
        before = list(inner.read_pages)
        opened.set()
        results = await asyncio.gather(*reads)
        await gate.aclose()
        return before, [r.page for r in results], inner.closed

    before, after, closed = asyncio.run(scenario())
    assert before == [] and after == [1, 2] and closed


def test_a_failed_start_never_reaches_a_page_and_stops_the_work() -> None:
    async def scenario() -> tuple[list[int], bool, str]:
        async def fail() -> None:
            await asyncio.sleep(0.05)
            raise EngineUnavailable("vLLM replica 0 exited with status 1")

        ready = asyncio.get_running_loop().create_task(fail())
        inner = Recorder()
        gate = ReadyGate(inner, ready)  # type: ignore[arg-type]
        cancelled = False

        async def work() -> None:
            nonlocal cancelled
            try:
                await gate.read(RenderedPage(1), PageKey("doc", 1))
            except asyncio.CancelledError:
                cancelled = True
                raise

        with pytest.raises(EngineUnavailable) as error:
            await _unless_start_fails(work(), ready)
        return inner.read_pages, cancelled, str(error.value)

    read, cancelled, message = asyncio.run(scenario())
    assert read == [] and cancelled and "exited with status 1" in message


def test_work_that_needs_no_engine_still_waits_for_its_start() -> None:
    # Every page had a text layer: the run still fails on a misconfigured engine, as it
    # did when the engine was checked before the first page.
    async def scenario() -> list[str]:
        events: list[str] = []

        async def start() -> None:
            await asyncio.sleep(0.05)
            events.append("start failed")
            raise EngineUnavailable("no server became ready")

        async def work() -> None:
            events.append("work done")

        ready = asyncio.get_running_loop().create_task(start())
        with pytest.raises(EngineUnavailable):
            await _unless_start_fails(work(), ready)
        return events

    assert asyncio.run(scenario()) == ["work done", "start failed"]


def test_a_started_engine_lets_the_work_finish_and_its_errors_through() -> None:
    async def scenario() -> None:
        ready = asyncio.get_running_loop().create_task(asyncio.sleep(0))

        async def work() -> None:
            await asyncio.sleep(0.05)
            raise ValueError("a bug in the work")

        with pytest.raises(ValueError, match="a bug in the work"):
            await _unless_start_fails(work(), ready)

    asyncio.run(scenario())


def test_a_long_document_sends_its_first_page_after_one_render() -> None:
    pages = list(range(1, 21))
    chunks = render_chunks(pages)
    assert chunks[0] == (1,)
    assert all(len(c) == CHUNK_PAGES for c in chunks[1:-1])
    assert [p for c in chunks for p in c] == pages  # every page once, in order
    short = list(range(1, CHUNK_PAGES + 1))
    assert render_chunks(short) == [tuple(short)]  # one job, as before
    assert render_chunks([]) == []
