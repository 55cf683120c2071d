"""The service's background thread: in-process worker slots, the database sync, callbacks,
and the removal of deleted jobs' folders once no worker holds them.

It has its own event loop, so OCR work never slows the API's loop; stopping it cancels the
loop's main task (running pages stop; the workspace keeps everything finished).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time

from .callbacks import send_callback
from .db import Job
from .jobs import JobStore, job_view
from .scheduler import Scheduler, SchedulerSettings

log = logging.getLogger("ocrflow.service")
SYNC_S = 0.5


class Background:
    """Starts and stops the thread."""

    def __init__(self, jobs: JobStore, scheduler: SchedulerSettings) -> None:
        self.jobs = jobs
        self.scheduler = scheduler
        self._loop: asyncio.AbstractEventLoop | None = None
        self._main: asyncio.Task[None] | None = None
        self._thread = threading.Thread(target=self._run, name="ocrflow-workers", daemon=True)
        self._ready = threading.Event()
        self._callbacks: dict[str, asyncio.Task[None]] = {}
        self._scheduler: Scheduler | None = None

    def start(self) -> None:
        """Start the thread (returns once its loop runs)."""
        self._thread.start()
        self._ready.wait(10)

    def stop(self, timeout_s: float = 15.0) -> None:
        """Cancel everything and wait for the thread."""
        if self._loop is not None and self._main is not None:
            self._loop.call_soon_threadsafe(self._main.cancel)
        self._thread.join(timeout_s)

    def _run(self) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            asyncio.run(self._main_task())

    async def _main_task(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._main = asyncio.current_task()
        self._ready.set()
        async with asyncio.TaskGroup() as group:
            group.create_task(self._sync_forever())
            if self.scheduler.slots > 0:
                self._scheduler = Scheduler(self.scheduler)
                group.create_task(self._scheduler.run())

    async def _sync_forever(self) -> None:
        while True:
            began = time.monotonic()
            try:
                await asyncio.to_thread(self.jobs.sync)
                # Every ended job (done, failed, cancelled; also before a restart) whose
                # callback has not gone out: one call each, never two at once.
                due = await asyncio.to_thread(self.jobs.pending_callbacks)
            except Exception:
                log.exception("could not refresh job progress")
                due = []
            try:
                # Deleted jobs' folders go once no slot (read here, on the slots' loop)
                # nor any lease holds them.
                await asyncio.to_thread(self.jobs.purge, self._busy())
            except Exception:
                log.exception("could not remove deleted jobs")
            for row in due:
                if row.id not in self._callbacks:
                    task = asyncio.get_running_loop().create_task(self._callback(row))
                    self._callbacks[row.id] = task
            self._callbacks = {k: t for k, t in self._callbacks.items() if not t.done()}
            # A sync reads every unfinished job's folder: with hundreds of jobs it takes a
            # good part of a second of CPU, so it never takes more than a third of the time.
            await asyncio.sleep(max(SYNC_S, 2 * (time.monotonic() - began)))

    def _busy(self) -> frozenset[str]:
        """Jobs a slot of this process works on now."""
        if self._scheduler is None:
            return frozenset()
        return frozenset(job for job, n in self._scheduler.assigned.items() if n > 0)

    async def _callback(self, row: Job) -> None:
        sent = await send_callback(row.callback_url or "", job_view(row))
        await asyncio.to_thread(self.jobs.mark_callback, row.id, "sent" if sent else "failed")
