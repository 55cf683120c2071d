"""Workers over every job under a service root, with a fair share for each job.

A worker slot picks the runnable job with the fewest workers on it (its own process's
count, then live leases of any process, then age), runs the ordinary worker loop
(``executors.worker.work``) on that job's workspace, and gives the job up when another
runnable job has nobody (so a 3-page job never waits behind a 10,000-page one for more than
a few items). The in-process workers of ``ocrflow serve`` and ``ocrflow worker --root`` on
other machines are the same code; leases keep them from doing a page twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ocrflow.config import RunConfig
from ocrflow.errors import OcrflowError
from ocrflow.executors.plan import rejoined
from ocrflow.executors.worker import Lent, WorkerOptions, work
from ocrflow.leases import LeaseManager
from ocrflow.metrics import Metrics
from ocrflow.sources import Source
from ocrflow.storage import open_store
from ocrflow.workspace import Workspace

from .layout import JobDir, job_ids
from .progress import pending_items
from .resources import EngineCache, SlotPool

log = logging.getLogger("ocrflow.service")


@dataclass(frozen=True)
class SchedulerSettings:
    """How this process's workers run jobs."""

    root: Path
    slots: int = 1
    api_key: str | None = None
    servers: tuple[str, ...] = ()
    render_workers: int = 1
    lease_ttl_s: float = 60.0
    #: Seconds a slot keeps a job before it may give it to a job that has nobody.
    slice_s: float = 2.0
    poll_s: float = 0.5
    exit_when_idle: bool = False
    #: Work items (documents, or ``split_pages`` ranges) one slot works on at once.
    items_in_flight: int = 4
    #: Prometheus metrics the workers report to (``/metrics``); ``None``: none.
    metrics: Metrics | None = None


class PageCounter:
    """A progress listener that records each opened document's page count in the job."""

    def __init__(self, job: JobDir) -> None:
        self.job = job

    def document_started(self, source: Source, pages: int) -> None:
        self.job.record_pages(source.uri, pages)

    def pages_finished(self, results: object) -> None:
        return None

    def document_finished(self, source: Source, result: object, skipped: bool) -> None:
        return None


class Scheduler:
    """Runs ``settings.slots`` worker slots until cancelled (or idle, if asked to)."""

    def __init__(self, settings: SchedulerSettings) -> None:
        self.settings = settings
        self.assigned: Counter[str] = Counter()
        #: When a slot of this process last let go of each job (monotonic seconds).
        self.served: dict[str, float] = {}
        self._runnable: list[str] = []
        self._looked = 0.0
        #: Each job's creation time (it never changes; reading ``job.json`` costs).
        self._created_at: dict[str, float] = {}
        #: Engines opened once and shared by every slot's slices (see ``resources``).
        self.engines = EngineCache(log_dir=str(settings.root / "logs"), metrics=settings.metrics)

    async def run(self) -> None:
        """Work until cancelled; with ``exit_when_idle``, until no job has work left."""
        try:
            async with asyncio.TaskGroup() as group:
                for index in range(self.settings.slots):
                    group.create_task(self._slot(index))
        finally:
            await self.engines.aclose()

    # -- choosing jobs ----------------------------------------------------------------
    def runnable(self, max_age_s: float = 0.0) -> list[str]:
        """Jobs with work left that nobody cancelled (cached for ``max_age_s``)."""
        if max_age_s and time.monotonic() - self._looked < max_age_s:
            return self._runnable
        found = []
        for job_id in job_ids(self.settings.root):
            job = JobDir(self.settings.root, job_id)
            if job.marked("cancelled") or job.marked("finished"):
                continue
            if pending_items(job) > 0:
                found.append(job_id)
            elif (job.out / ".ocrflow" / "manifest").is_dir():
                job.mark("finished")
        self._runnable, self._looked = found, time.monotonic()
        return found

    def pick(self) -> str | None:
        """The runnable job that has the fewest workers now; the oldest first on a tie."""
        # Looking at every job's folder costs ~1 ms a job, and a slot picks after each short
        # slice: with hundreds of jobs, fresh looks at every pick cost more CPU than the
        # pages. A look up to ``poll_s`` old will do (a job finished since then costs an
        # empty slice), unless it found nothing: new jobs are then seen at once.
        jobs = self.runnable(max_age_s=self.settings.poll_s) or self.runnable()
        if not jobs:
            return None
        # Fewest workers first, then the job served longest ago (never: first), then the
        # oldest: a job just given up for another does not get the slot straight back.
        # Leases (other processes' workers) are read only for jobs with fewest of ours.
        fewest = min(self.assigned[j] for j in jobs)
        return min(
            (j for j in jobs if self.assigned[j] == fewest),
            key=lambda j: (self._leases(j), self.served.get(j, 0.0), self._created(j)),
        )

    def _created(self, job_id: str) -> float:
        created = self._created_at.get(job_id)
        if created is None:
            meta = JobDir(self.settings.root, job_id).read_meta()
            if meta is None:
                return 0.0  # being created: looked at again next time
            created = self._created_at[job_id] = meta.created
        return created

    def _leases(self, job_id: str) -> int:
        store = open_store(str(JobDir(self.settings.root, job_id).out))
        return len(LeaseManager(store, "scheduler").active())

    def _should_leave(self, job_id: str, since: float) -> bool:
        """Give the job up: it was cancelled, or another job waits with nobody on it."""
        job = JobDir(self.settings.root, job_id)
        if job.marked("cancelled"):
            return True
        if time.monotonic() - since < self.settings.slice_s:
            return False
        others = [j for j in self.runnable(max_age_s=1.0) if j != job_id]
        return any(self.assigned[j] == 0 for j in others)

    # -- working ----------------------------------------------------------------------
    async def _slot(self, index: int) -> None:
        pool = SlotPool()  # this slot's render processes, kept from job to job
        try:
            await self._slot_loop(index, pool)
        finally:
            pool.close()

    async def _slot_loop(self, index: int, pool: SlotPool) -> None:
        while True:
            try:
                job_id = await asyncio.to_thread(self.pick)
            except (OSError, ValueError, OcrflowError):
                log.exception("worker slot %d: could not look for jobs", index)
                job_id = None
            if job_id is None:
                if self.settings.exit_when_idle:
                    return
                await asyncio.sleep(self.settings.poll_s)
                continue
            self.assigned[job_id] += 1
            try:
                await self._work_on(job_id, pool)
            except Exception:
                # One job's trouble (its engine down, its folder broken) must not stop the
                # slot: log it and take the next job; the job is retried at the next pick.
                log.exception("worker slot %d: job %s failed", index, job_id)
                await pool.discard()  # its processes may be part of the trouble
                await asyncio.sleep(self.settings.poll_s)
            finally:
                self.assigned[job_id] -= 1
                self.served[job_id] = time.monotonic()

    async def _work_on(self, job_id: str, pool: SlotPool) -> None:
        """One slice of work on a job; its running pages stop at once if it is cancelled."""
        job = JobDir(self.settings.root, job_id)
        workspace = Workspace(open_store(str(job.out)))
        since = time.monotonic()
        config = rejoined(
            await asyncio.to_thread(workspace.recorded_run_config),
            str(job.out),
            passwords=(),
            api_key=self.settings.api_key,
            servers=self.settings.servers,
            workers=self.settings.render_workers,
            lease_ttl=self.settings.lease_ttl_s,
        )
        options = WorkerOptions(
            lease_ttl_s=self.settings.lease_ttl_s,
            split_pages=config.scale.split_pages,
            idle_poll_s=self.settings.poll_s,
            report_finished_before=False,
            should_stop=lambda: self._should_leave(job_id, since),
            max_items_in_flight=self.settings.items_in_flight,
        )
        task = asyncio.current_task()
        assert task is not None
        body = asyncio.ensure_future(self._slice(config, workspace, options, job, pool))
        watch = asyncio.ensure_future(self._watch_cancel(job, body))
        try:
            await body
        except asyncio.CancelledError:
            if not body.cancelled() or task.cancelling():
                raise
            log.info("job %s cancelled: its running pages stopped", job_id)
        finally:
            watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watch
            if not body.done():
                body.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await body
        if await asyncio.to_thread(pending_items, job) == 0:
            job.mark("finished")
            self._runnable = [j for j in self._runnable if j != job_id]

    async def _slice(
        self,
        config: RunConfig,
        workspace: Workspace,
        options: WorkerOptions,
        job: JobDir,
        pool: SlotPool,
    ) -> None:
        """``work`` on the job with the slot's render processes and the shared engine (a
        cancel while the engine opens stops this slice only, not the opening)."""
        render_pool = await pool.get(config.render)
        async with self.engines.session(config.engine) as session:
            lent = Lent(pool=render_pool, session=session)
            await work(
                config, workspace, options=options, progress=PageCounter(job),  # type: ignore[arg-type]
                metrics=self.settings.metrics, lent=lent,
            )  # fmt: skip

    async def _watch_cancel(self, job: JobDir, body: asyncio.Future[object]) -> None:
        while not body.done():
            await asyncio.sleep(self.settings.poll_s)
            if await asyncio.to_thread(job.marked, "cancelled"):
                body.cancel()
                return
