"""Workers over every job under a service root, with a fair share for each token, then for
each of its jobs.

A worker slot picks the owner (token) with the fewest slots of this process on its jobs
(then the one served longest ago), then that owner's runnable job with the fewest workers
(its own process's count, then live leases of any process, then age); it runs the ordinary
worker loop (``executors.worker.work``) on that job's workspace, and gives the job up after
a short slice when another owner's job waits with nobody of its owner at work, or another
job of the same owner has nobody. So a token that floods the queue with 2,000 jobs delays
another token's 1-page job by one slice, not by its 2,000 jobs; and a 3-page job never
waits behind a 10,000-page one for more than a few items. The in-process workers of
``ocrflow serve`` and ``ocrflow worker --root`` on other machines are the same code; leases
keep them from doing a page twice.

A job that goes past its page limit (``quotas.PageCounter``) or whose engine never opens
(``resources.StartRetries``) is given up: ``progress.fail_job`` marks it, its running pages
stop, and its documents not finished fail with the reason. A slice that fails otherwise
pauses its job (the same growing backoff, never given up): no traceback every poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ocrflow.config import RunConfig
from ocrflow.errors import OcrflowError
from ocrflow.executors.item_loop import WorkerOptions
from ocrflow.executors.plan import rejoined
from ocrflow.executors.worker import Lent, work
from ocrflow.observe.metrics import Metrics
from ocrflow.storage.open import open_store
from ocrflow.workspace.leases import LeaseManager
from ocrflow.workspace.state import Workspace

from .layout import DELETED, JobDir, job_ids
from .progress import FAILED_MARKER, fail_job, pending_items
from .quotas import PageCounter, read_job_limits
from .resources import (
    EngineCache,
    EngineStartError,
    SlotPool,
    StartRetries,
    start_failure_message,
)

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
    #: Attempts at opening a job's engine before the job fails with ``engine_error``.
    engine_attempts: int = 5
    #: Seconds before the second attempt; twice as long before each next one (max 30 s).
    engine_backoff_s: float = 2.0


class Scheduler:
    """Runs ``settings.slots`` worker slots until cancelled (or idle, if asked to)."""

    def __init__(self, settings: SchedulerSettings) -> None:
        self.settings = settings
        self.assigned: Counter[str] = Counter()
        #: Slots of this process on each owner's jobs.
        self.owner_slots: Counter[str] = Counter()
        #: When a slot of this process last let go of each job / owner (monotonic seconds).
        self.served: dict[str, float] = {}
        self.owner_served: dict[str, float] = {}
        self._runnable: list[str] = []
        self._looked = 0.0
        #: Each job's owner and creation time (they never change; reading ``job.json`` costs).
        self._meta: dict[str, tuple[str, float]] = {}
        #: Engines opened once and shared by every slot's slices (see ``resources``).
        self.engines = EngineCache(log_dir=str(settings.root / "logs"), metrics=settings.metrics)
        self.retries = StartRetries(settings.engine_attempts, settings.engine_backoff_s)
        #: Jobs whose slices failed otherwise (a broken folder, a full disk): paused, never
        #: given up (the cause may pass), and one traceback per run of failures.
        self.troubles = StartRetries(None, max(settings.engine_backoff_s, settings.poll_s))

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
        """Jobs with work left that nobody cancelled or gave up (cached for ``max_age_s``)."""
        if max_age_s and time.monotonic() - self._looked < max_age_s:
            return self._runnable
        found = []
        for job_id in job_ids(self.settings.root):
            job = JobDir(self.settings.root, job_id)
            if _stopped(job) or job.marked("finished"):
                continue
            if pending_items(job) > 0:
                found.append(job_id)
            elif (job.out / ".ocrflow" / "manifest").is_dir():
                job.mark("finished")
        self._runnable, self._looked = found, time.monotonic()
        self.retries.keep_only(set(found))
        self.troubles.keep_only(set(found))
        return found

    def pick(self) -> str | None:
        """A job of the owner with the fewest of our slots (then served longest ago, then
        with the oldest job); of its jobs, the one with the fewest workers, then the oldest.
        Jobs pausing before their engine's next attempt are left out."""
        # Looking at every job's folder costs ~1 ms a job, and a slot picks after each short
        # slice: with hundreds of jobs, fresh looks at every pick cost more CPU than the
        # pages. A look up to ``poll_s`` old will do (a job finished since then costs an
        # empty slice), unless it found nothing: new jobs are then seen at once.
        now = time.monotonic()
        found = self.runnable(max_age_s=self.settings.poll_s) or self.runnable()
        by_owner: dict[str, list[str]] = {}
        for job_id in found:
            if not self._paused(job_id, now):
                by_owner.setdefault(self._owner(job_id), []).append(job_id)
        if not by_owner:
            return None
        owner = min(
            by_owner,
            key=lambda o: (
                self.owner_slots[o],
                self.owner_served.get(o, 0.0),
                min(self._created(j) for j in by_owner[o]),
            ),
        )
        jobs = by_owner[owner]
        # Fewest workers first, then the job served longest ago (never: first), then the
        # oldest: a job just given up for another does not get the slot straight back.
        # Leases (other processes' workers) are read only for jobs with fewest of ours.
        fewest = min(self.assigned[j] for j in jobs)
        return min(
            (j for j in jobs if self.assigned[j] == fewest),
            key=lambda j: (self._leases(j), self.served.get(j, 0.0), self._created(j)),
        )

    def _paused(self, job_id: str, now: float) -> bool:
        return self.retries.waiting(job_id, now) or self.troubles.waiting(job_id, now)

    def _job_meta(self, job_id: str) -> tuple[str, float]:
        meta = self._meta.get(job_id)
        if meta is None:
            read = JobDir(self.settings.root, job_id).read_meta()
            if read is None:
                return "", 0.0  # being created: looked at again next time
            meta = self._meta[job_id] = (read.owner, read.created)
        return meta

    def _owner(self, job_id: str) -> str:
        return self._job_meta(job_id)[0]

    def _created(self, job_id: str) -> float:
        return self._job_meta(job_id)[1]

    def _leases(self, job_id: str) -> int:
        store = open_store(str(JobDir(self.settings.root, job_id).out))
        return len(LeaseManager(store, "scheduler").active())

    def _should_leave(self, job_id: str, since: float) -> bool:
        """Give the job up: it was cancelled, deleted or given up, or (after a slice) another
        owner's job waits with none of our slots on its owner, or another job of the same
        owner waits with nobody."""
        if _stopped(JobDir(self.settings.root, job_id)):
            return True
        now = time.monotonic()
        if now - since < self.settings.slice_s:
            return False
        mine = self._owner(job_id)
        for other in self.runnable(max_age_s=1.0):
            if other == job_id or self.assigned[other] or self._paused(other, now):
                continue
            owner = self._owner(other)
            if owner == mine or self.owner_slots[owner] == 0:
                return True
        return False

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
                if self.settings.exit_when_idle and not (self.retries or self.troubles):
                    return
                await asyncio.sleep(self.settings.poll_s)
                continue
            owner = self._owner(job_id)
            self.assigned[job_id] += 1
            self.owner_slots[owner] += 1
            try:
                await self._work_on(job_id, pool)
                self.troubles.succeeded(job_id)
            except EngineStartError as exc:
                await self._engine_failed(job_id, exc)
            except Exception as exc:
                # One job's trouble (its folder broken) must not stop the slot: log it and
                # take the next job; the job is tried again after a pause.
                self._slice_failed(index, job_id, exc)
                await pool.discard()  # its processes may be part of the trouble
            finally:
                self.assigned[job_id] -= 1
                self.owner_slots[owner] -= 1
                self.served[job_id] = self.owner_served[owner] = time.monotonic()

    def _slice_failed(self, index: int, job_id: str, exc: Exception) -> None:
        """A traceback for the first failure in a row, one line for each next one."""
        attempts, delay = self.troubles.failed(job_id, time.monotonic())
        if attempts == 1:
            log.exception("worker slot %d: job %s failed (tried again in %.0f s)",
                          index, job_id, delay or 0)  # fmt: skip
        else:
            log.warning("worker slot %d: job %s failed again (%d in a row, next in %.0f s): "
                        "%s: %s", index, job_id, attempts, delay or 0,
                        type(exc).__name__, exc)  # fmt: skip

    async def _engine_failed(self, job_id: str, exc: EngineStartError) -> None:
        """One log line an attempt; after the last one the job fails with the cause."""
        cause = exc.__cause__ or exc
        attempts, delay = self.retries.failed(job_id, time.monotonic())
        total = self.retries.attempts
        if delay is not None:
            log.warning("job %s: the engine could not be opened (attempt %d of %d, next in "
                        "%.0f s): %s: %s", job_id, attempts, total, delay,
                        type(cause).__name__, cause)  # fmt: skip
            return
        log.warning("job %s failed: the engine could not be opened (attempt %d of %d): %s: %s",
                    job_id, attempts, total, type(cause).__name__, cause)  # fmt: skip
        job = JobDir(self.settings.root, job_id)
        message = start_failure_message(cause, attempts)
        await asyncio.to_thread(fail_job, job, "engine_error", message)

    async def _work_on(self, job_id: str, pool: SlotPool) -> None:
        """One slice of work on a job; its running pages stop at once if it is cancelled,
        deleted or given up."""
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
        stop_now = asyncio.Event()
        counter = await asyncio.to_thread(self._page_counter, job, stop_now.set)
        body = asyncio.ensure_future(self._slice(config, workspace, options, counter, pool))
        watch = asyncio.ensure_future(self._watch_stop(job, body, stop_now))
        try:
            await body
        except asyncio.CancelledError:
            if not body.cancelled() or task.cancelling():
                raise
            log.info("job %s stopped (cancelled or given up): its running pages stopped", job_id)
        finally:
            watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watch
            if not body.done():
                body.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await body
        if await asyncio.to_thread(_stopped, job):
            return  # (a deleted job's folder is about to go: no marker must recreate it)
        if await asyncio.to_thread(pending_items, job) == 0:
            job.mark("finished")
            self._runnable = [j for j in self._runnable if j != job_id]

    def _page_counter(self, job: JobDir, stop: Callable[[], None]) -> PageCounter:
        return PageCounter(job, read_job_limits(job.path).max_pages, stop)

    async def _slice(
        self,
        config: RunConfig,
        workspace: Workspace,
        options: WorkerOptions,
        counter: PageCounter,
        pool: SlotPool,
    ) -> None:
        """``work`` on the job with the slot's render processes and the shared engine (a
        cancel while the engine opens stops this slice only, not the opening)."""
        render_pool = await pool.get(config.render)
        async with contextlib.AsyncExitStack() as stack:
            try:
                session = await stack.enter_async_context(self.engines.session(config.engine))
            except Exception as exc:
                raise EngineStartError(f"the engine could not be opened: {exc}") from exc
            self.retries.succeeded(counter.job.id)
            lent = Lent(pool=render_pool, session=session)
            await work(
                config, workspace, options=options, progress=counter,
                metrics=self.settings.metrics, lent=lent,
            )  # fmt: skip

    async def _watch_stop(
        self, job: JobDir, body: asyncio.Future[None], stop_now: asyncio.Event
    ) -> None:
        while not body.done():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop_now.wait(), self.settings.poll_s)
            if stop_now.is_set() or await asyncio.to_thread(_stopped, job):
                body.cancel()
                return


def _stopped(job: JobDir) -> bool:
    """Cancelled or deleted by its owner, or given up by the workers (``failed.json``)."""
    return (
        job.marked("cancelled") is not None
        or (job.path / DELETED).exists()
        or (job.path / FAILED_MARKER).exists()
    )
