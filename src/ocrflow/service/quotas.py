"""Quotas per token: how many jobs it may have waiting, how fast it may submit, how large a
job and its backlog may be. One token must not fill the queue or the disk for the others.

A submission is admitted (or refused with 429 and ``Retry-After``) before its body is read:
submissions per minute, unfinished jobs, unfinished pages. Documents per job are counted
while the job is planned (planning stops past the cap: 413); pages per job are only known
when a document is opened, so the workers stop a job that goes past its cap
(``JobLimits``, written into the job's folder when it is created; ``PageCounter`` counts)
and fail the rest of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import Counter, deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict
from sqlalchemy import select

from ocrflow.inputs.source import Source

from .db import TERMINAL, Database, Job
from .layout import JobDir
from .progress import fail_job
from .uploads import UploadError

#: Seconds a client is told to wait when its backlog (jobs or pages) is full.
BACKLOG_RETRY_S = 30
LIMITS_FILE = "limits.json"


@dataclass(frozen=True)
class QuotaSettings:
    """The operator's limits (``ocrflow serve`` flags); 0 turns a limit off."""

    #: Jobs of one token queued or running at once.
    max_queued_jobs: int = 100
    #: Documents one job may name (files, walked folders, dataset rows).
    max_documents_per_job: int = 1000
    #: Pages one job may have (counted as its documents are opened).
    max_pages_per_job: int = 10_000
    #: Pages of one token queued or running at once (a document not opened yet: one page).
    max_pages_per_token: int = 50_000
    #: Jobs one token may submit in any 60 seconds.
    max_submissions_per_minute: int = 60
    #: Page previews (web page images) one token may have rendering at once.
    max_previews_per_token: int = 1
    #: Processes rendering previews (shared by every token).
    preview_workers: int = 2


class QuotaExceeded(Exception):
    """A limit refuses the request: ``status`` (429) and seconds to wait."""

    def __init__(self, message: str, retry_after_s: int, status: int = 429) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after_s = max(1, retry_after_s)

    def headers(self) -> dict[str, str]:
        """``Retry-After`` for the answer."""
        return {"Retry-After": str(self.retry_after_s)}


class JobTooLarge(UploadError):
    """A job names more documents than allowed (413, like a body that is too large)."""

    def __init__(self, message: str) -> None:
        super().__init__(413, message)


class JobLimits(BaseModel):
    """The limits a job was created under, kept in its folder so that every worker (the
    service's own, ``ocrflow worker --root`` elsewhere) enforces the same ones."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    max_pages: int = 0


def write_job_limits(job_path: Path, settings: QuotaSettings) -> None:
    """Record the job's limits (before its ``job.json``: workers never see a job without)."""
    job_path.mkdir(parents=True, exist_ok=True)
    limits = JobLimits(max_pages=settings.max_pages_per_job)
    (job_path / LIMITS_FILE).write_text(limits.model_dump_json(), encoding="utf-8")


def read_job_limits(job_path: Path) -> JobLimits:
    """The job's limits; none for a job created before limits existed."""
    try:
        return JobLimits.model_validate_json((job_path / LIMITS_FILE).read_bytes())
    except (OSError, ValueError):
        return JobLimits()


@dataclass
class Quotas:
    """Admission of new jobs per owner (one instance per API process, on its event loop)."""

    db: Database
    settings: QuotaSettings = field(default_factory=QuotaSettings)
    _submitted: dict[str, deque[float]] = field(default_factory=dict)
    _reserved: Counter[str] = field(default_factory=Counter)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    @contextlib.asynccontextmanager
    async def admitted(self, owner: str) -> AsyncIterator[None]:
        """Hold a place for one new job of ``owner`` while it is created; ``QuotaExceeded``
        when the owner submits too fast or its backlog is full."""
        async with self._lock:  # counting and reserving are one step
            self._check_rate(owner, time.monotonic())
            jobs, pages = await asyncio.to_thread(self.usage, owner)
            self._check_backlog(jobs + self._reserved[owner], pages + self._reserved[owner])
            self._reserved[owner] += 1
            self._submitted.setdefault(owner, deque()).append(time.monotonic())
        try:
            yield
        finally:
            # Released under the lock: a count running now saw either the reservation or
            # the inserted row (or both), never neither.
            async with self._lock:
                self._reserved[owner] -= 1
                if self._reserved[owner] <= 0:
                    del self._reserved[owner]

    def usage(self, owner: str) -> tuple[int, int]:
        """The owner's unfinished jobs and their pages still to do (at least one a
        document not finished, since pages are known only once a document is opened)."""
        query = select(Job.documents, Job.pages_total, Job.pages_done).where(
            Job.owner == owner, Job.status.not_in(TERMINAL)
        )
        with self.db.session() as session:
            rows = session.execute(query).all()
        pages = 0
        for documents, total, done in rows:
            waiting = sum(n for state, n in (documents or {}).items() if state in _WAITING)
            pages += max(total - done, waiting, 1)
        return len(rows), pages

    def _check_rate(self, owner: str, now: float) -> None:
        limit = self.settings.max_submissions_per_minute
        recent = self._submitted.get(owner)
        if recent is None:
            return
        while recent and recent[0] <= now - 60:
            recent.popleft()
        if not recent:
            del self._submitted[owner]
        elif limit and len(recent) >= limit:
            wait = math.ceil(recent[0] + 60 - now)
            raise QuotaExceeded(
                f"too many submissions: at most {limit} jobs a minute per token", wait
            )

    def _check_backlog(self, jobs: int, pages: int) -> None:
        max_jobs, max_pages = self.settings.max_queued_jobs, self.settings.max_pages_per_token
        if max_jobs and jobs >= max_jobs:
            raise QuotaExceeded(
                f"too many unfinished jobs: at most {max_jobs} queued or running per token",
                BACKLOG_RETRY_S,
            )
        if max_pages and pages >= max_pages:
            raise QuotaExceeded(
                f"too many unfinished pages: at most {max_pages} queued or running per token",
                BACKLOG_RETRY_S,
            )


class PageCounter:
    """A progress listener that records each opened document's page count in the job, and
    gives the job up (``page_limit``) once its pages go past ``max_pages`` (0: no limit)."""

    def __init__(
        self, job: JobDir, max_pages: int = 0, stop: Callable[[], None] | None = None
    ) -> None:
        self.job = job
        self.max_pages = max_pages
        self.stop = stop
        # Other workers' counts as of the slice's start; ours are added as we go.
        self.counts = job.page_counts() if max_pages else {}
        self.total = sum(self.counts.values())

    def document_started(self, source: Source, pages: int) -> None:
        self.job.record_pages(source.uri, pages)
        if not self.max_pages:
            return
        self.total += pages - self.counts.get(source.uri, 0)
        self.counts[source.uri] = pages
        if self.total > self.max_pages:
            fail_job(
                self.job, "page_limit",
                f"the job has more than {self.max_pages} pages (this service's limit per "
                "job); documents not finished were stopped",
            )  # fmt: skip
            if self.stop is not None:
                self.stop()  # the slice: the job's other items stop too
            # This document's item: its pages must not be converted (it is the item's task
            # that reports the document started, right before converting it).
            task = asyncio.current_task()
            if task is not None:
                task.cancel()

    def pages_finished(self, results: object) -> None:
        return None

    def document_finished(self, source: Source, result: object, skipped: bool) -> None:
        return None


_WAITING = frozenset({"queued", "running"})
