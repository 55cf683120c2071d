"""What a person sees while a run goes: a rich progress bar on a terminal, log lines elsewhere."""

from __future__ import annotations

import logging
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

from ocrflow.sources import Source
from ocrflow.types import DocStatus, DocumentResult, PageResult

log = logging.getLogger("ocrflow")


class LogProgress:
    """One log line per finished document (for pipes, CI and log files)."""

    def __init__(self, total_documents: int) -> None:
        self.total = total_documents
        self.done = 0

    def document_started(self, source: Source, pages: int) -> None:
        log.debug("start %s (%d pages)", source.rel, pages)

    def pages_finished(self, results: list[PageResult]) -> None:
        pass

    def document_finished(self, source: Source, result: DocumentResult, skipped: bool) -> None:
        self.done += 1
        what = "already done" if skipped else str(result.status)
        detail = f" [{result.reason}] {result.message}" if result.status is not DocStatus.OK else ""
        level = (
            logging.WARNING if result.status is DocStatus.FAILED and not skipped else logging.INFO
        )
        log.log(level, "[%d/%d] %s: %s%s", self.done, self.total, source.rel, what, detail)


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
