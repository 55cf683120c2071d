"""The periodic progress line: pages done/total, speed over a window, ETA, failures."""

from __future__ import annotations

import logging
import time

import pytest

from ocrflow.inputs.source import Source
from ocrflow.observe.progress import LogProgress, PageTally
from ocrflow.types import DocStatus, DocumentResult, PageResult, PageStatus, Route


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _pages(first: int, count: int, status: PageStatus = PageStatus.OK) -> list[PageResult]:
    return [PageResult(n, "t", Route.ENGINE, status) for n in range(first, first + count)]


def test_line_counts_pages_speed_and_eta() -> None:
    clock = Clock()
    tally = PageTally(2, clock)
    tally.document_started(100)
    tally.document_started(50)
    clock.now += 10
    tally.pages_finished(_pages(1, 20))
    tally.pages_finished(_pages(21, 1, PageStatus.FAILED))
    line = tally.line()
    assert line.startswith("progress: 21/150 pages (14%), 0/2 documents, 2.1 pages/s")
    assert "ETA 1m01s" in line and "failed: 1 pages, 0 documents" in line


def test_total_is_estimated_until_every_document_is_opened() -> None:
    clock = Clock()
    tally = PageTally(4, clock)
    tally.document_finished(DocumentResult("s", "/s", DocStatus.OK, (), 3), skipped=True)
    failed = DocumentResult("f", "/f", DocStatus.FAILED, (), 0, "corrupt", "bad")
    tally.document_finished(failed, skipped=False)  # never opened: no pages
    tally.document_started(10)
    clock.now += 5
    tally.pages_finished(_pages(1, 5))
    line = tally.line()
    # One document left unopened, estimated at the mean of the opened one (10 pages).
    assert "5/~20 pages" in line and "ETA ~" in line and "2/4 documents" in line
    assert "failed: 0 pages, 1 documents" in line


def test_speed_is_averaged_over_recent_ticks() -> None:
    clock = Clock()
    tally = PageTally(1, clock)
    tally.document_started(10_000)
    for _ in range(PageTally.WINDOW + 3):  # a fast start, then 1 page/s
        clock.now += 10
        tally.pages_finished(_pages(1, 1000 if clock.now < 130 else 10))
        tally.line()
    assert ", 1.0 pages/s," in tally.line()


def test_log_progress_ticks_in_a_thread(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="ocrflow")
    source = Source("/in/a.pdf", "a.pdf", "pdf", 1)
    with LogProgress(1, interval_s=0.05) as progress:
        progress.document_started(source, 4)
        progress.pages_finished(_pages(1, 2))
        deadline = 200
        while deadline and not any("progress: 2/4" in r.message for r in caplog.records):
            deadline -= 1
            time.sleep(0.05)
    assert any("progress: 2/4 pages (50%)" in r.message for r in caplog.records)
    ticks = sum("progress:" in r.message for r in caplog.records)
    time.sleep(0.2)
    assert sum("progress:" in r.message for r in caplog.records) == ticks  # stopped at exit
