"""What a person sees while a run goes: a rich progress bar on a terminal, log lines elsewhere."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from ocrflow.inputs.source import Source
from ocrflow.types import DocStatus, DocumentResult, PageResult, PageStatus

log = logging.getLogger("ocrflow")


class LogProgress:
    """Log lines for pipes, CI and log files: one per finished document, and — when
    ``interval_s`` is above 0 and the object is entered (``with``) — a progress line every
    ``interval_s`` seconds whatever documents and shards do (see ``PageTally.line``), so a
    1,500-page document or a buffered Parquet shard never leaves the log silent."""

    def __init__(self, total_documents: int, *, interval_s: float = 0.0) -> None:
        self.total = total_documents
        self.done = 0
        self.interval_s = interval_s
        self.tally = PageTally(total_documents)
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    def __enter__(self) -> LogProgress:
        if self.interval_s > 0:
            # A thread, not a task: the line comes on time even while the event loop is busy.
            self._ticker = threading.Thread(target=self._tick, name="ocrflow-progress", daemon=True)
            self._ticker.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(timeout=5)

    def _tick(self) -> None:
        while not self._stop.wait(self.interval_s):
            log.info("%s", self.tally.line())

    def document_started(self, source: Source, pages: int) -> None:
        log.debug("start %s (%d pages)", source.rel, pages)
        self.tally.document_started(pages)

    def pages_finished(self, results: list[PageResult]) -> None:
        self.tally.pages_finished(results)

    def document_finished(self, source: Source, result: DocumentResult, skipped: bool) -> None:
        self.done += 1
        self.tally.document_finished(result, skipped)
        what = "already done" if skipped else str(result.status)
        detail = f" [{result.reason}] {result.message}" if result.status is not DocStatus.OK else ""
        level = (
            logging.WARNING if result.status is DocStatus.FAILED and not skipped else logging.INFO
        )
        log.log(level, "[%d/%d] %s: %s%s", self.done, self.total, source.rel, what, detail)


class PageTally:
    """Pages done and known, failures and speed, counted from progress events (which may
    come from another thread than the one asking for ``line``: a lock guards them)."""

    #: Ticks the speed is averaged over (a minute at the default 10 s interval).
    WINDOW = 6

    def __init__(self, total_documents: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.total_documents = total_documents
        self.clock = clock
        self._lock = threading.Lock()
        self.pages_done = self.pages_known = self.pages_failed = 0
        self.started = self.finished = self.skipped = self.unopened = self.failed = 0
        self._samples: deque[tuple[float, int]] = deque([(clock(), 0)], maxlen=self.WINDOW + 1)

    def document_started(self, pages: int) -> None:
        with self._lock:
            self.started += 1
            self.pages_known += pages

    def pages_finished(self, results: list[PageResult]) -> None:
        with self._lock:
            self.pages_done += len(results)
            self.pages_failed += sum(r.status is PageStatus.FAILED for r in results)

    def document_finished(self, result: DocumentResult, skipped: bool) -> None:
        with self._lock:
            self.finished += 1
            self.skipped += int(skipped)
            # Finished without starting: it could not be opened (no pages to count).
            self.unopened += int(not skipped and not result.pages)
            self.failed += int(not skipped and result.status is not DocStatus.OK)

    def line(self) -> str:
        """``progress: 120/~1,500 pages (8%), 3/10 documents, 12.3 pages/s, ETA 1m52s,
        failed: 0 pages, 0 documents``; ``~``: the page total is estimated from the
        documents opened so far."""
        with self._lock:
            now = self.clock()
            self._samples.append((now, self.pages_done))
            rate = _rate(self._samples)
            total, estimated = self._page_total()
            mark = "~" if estimated else ""
            known = total > 0 or not estimated
            left = max(total - self.pages_done, 0)
            eta = f"{mark}{_duration(left / rate)}" if rate > 0 and known else "unknown"
            share = f" ({100 * self.pages_done / total:.0f}%)" if total else ""
            return (
                f"progress: {self.pages_done:,}/{f'{mark}{total:,}' if known else '?'} "
                f"pages{share}, {self.finished:,}/{self.total_documents:,} documents, "
                f"{rate:.1f} pages/s, ETA {eta}, failed: {self.pages_failed:,} pages, "
                f"{self.failed:,} documents"
            )

    def _page_total(self) -> tuple[int, bool]:
        """Pages of the documents opened, plus an estimate for those not opened yet (the
        mean of the opened ones); whether it is an estimate."""
        waiting = self.total_documents - self.skipped - self.unopened - self.started
        if waiting <= 0 or not self.started:
            return self.pages_known, waiting > 0
        return self.pages_known + round(waiting * self.pages_known / self.started), True


def _rate(samples: deque[tuple[float, int]]) -> float:
    (t0, p0), (t1, p1) = samples[0], samples[-1]
    return (p1 - p0) / (t1 - t0) if t1 > t0 else 0.0


def _duration(seconds: float) -> str:
    """``45s``, ``3m20s``, ``2h05m``."""
    whole = int(seconds + 0.5)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


class BarProgress:
    """A live bar of documents and pages with pages/s and ETA."""

    def __init__(self, total_documents: int, console: Console) -> None:
        self._bar = Progress(
            TextColumn("{task.description:<9}"),
            BarColumn(),
            MofNCompleteColumn(),
            TaskProgressColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console,
            transient=False,
        )
        self._docs = self._bar.add_task("documents", total=total_documents, rate="")
        self._pages = self._bar.add_task("pages", total=0, rate="")

    def __enter__(self) -> BarProgress:
        self._bar.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._bar.stop()

    def document_started(self, source: Source, pages: int) -> None:
        task = self._bar.tasks[self._pages]
        self._bar.update(self._pages, total=(task.total or 0) + pages)

    def pages_finished(self, results: list[PageResult]) -> None:
        self._bar.advance(self._pages, len(results))
        speed = self._bar.tasks[self._pages].speed
        self._bar.update(self._pages, rate=f"{speed:.1f} pages/s" if speed else "")

    def document_finished(self, source: Source, result: DocumentResult, skipped: bool) -> None:
        self._bar.advance(self._docs, 1)
        if result.status is DocStatus.FAILED and not skipped:
            self._bar.console.print(
                f"[yellow]failed[/] {source.rel}: [{result.reason}] {result.message}"
            )
