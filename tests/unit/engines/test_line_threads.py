"""A lone page's lines are read side by side (``line_threads.py``): in several threads, in
the page's order, and to the very same text as one thread reads."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from PIL import Image

from ocrflow.engines.embedded import EmbeddedEngine
from ocrflow.engines.line_threads import MIN_SHARED_LINES, LineThreads

CORPUS = Path(__file__).resolve().parents[3] / ".." / "shared" / "corpus"


def test_parts_run_in_several_threads_and_come_back_in_order() -> None:
    threads = LineThreads(2)
    seen: set[str] = set()
    both_in = threading.Barrier(2, timeout=5)

    def work(part: int) -> int:
        seen.add(threading.current_thread().name)
        both_in.wait()  # passes only when the two parts run at the same time
        return part * 10

    try:
        assert threads.map(work, [1, 2]) == [10, 20]
    finally:
        threads.close()
    assert len(seen) == 2 and threading.current_thread().name not in seen


def test_one_thread_or_few_lines_stay_in_the_callers_thread() -> None:
    names: list[str] = []
    LineThreads(1).map(lambda _: names.append(threading.current_thread().name), [1, 2, 3])
    assert set(names) == {threading.current_thread().name}
    assert LineThreads(4).shares(MIN_SHARED_LINES - 1) == 1
    assert LineThreads(4).shares(MIN_SHARED_LINES) == 4


def test_a_closed_pool_starts_again_when_used() -> None:
    threads = LineThreads(2)
    assert threads.map(lambda x: x + 1, [1, 2]) == [2, 3]
    threads.close()
    assert threads.map(lambda x: x + 1, [3, 4]) == [4, 5]
    threads.close()


def test_a_page_read_by_shared_lines_reads_the_same() -> None:
    with Image.open(CORPUS / "images" / "tesseract__eurotext.tif") as image:
        page = image.convert("RGB")
    alone, shared = EmbeddedEngine(threads=1), EmbeddedEngine(threads=1, max_parallel=2)
    try:
        expected = alone.recognize(page)
        got = shared.recognize(page)
    finally:
        asyncio.run(alone.aclose())
        asyncio.run(shared.aclose())
    assert len(expected.boxes) >= MIN_SHARED_LINES
    assert got.text == expected.text
    assert [b.score for b in got.boxes] == [b.score for b in expected.boxes]
