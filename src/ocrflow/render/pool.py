"""A pool of render worker processes with per-page timeouts, crash isolation and a memory cap.

PDFium is not thread-safe, so rendering happens in processes. A page that hangs or crashes
its worker costs only that worker: pebble kills and replaces it, and the pages that shared
its job are rendered again one by one so the culprit is named precisely.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import resource
import signal
import threading
from collections.abc import Callable
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TypeVar

from pebble import ProcessExpired, ProcessPool

from ocrflow.render.jobs import (
    DocumentProbe,
    PageJob,
    ProbeJob,
    RenderedPage,
    probe_document,
    render_pages,
)
from ocrflow.types import Reason

_Job = TypeVar("_Job")
_Result = TypeVar("_Result")

_OPEN_ALLOWANCE_S = 30.0


def _limit_memory(limit_mb: int) -> None:
    limit = limit_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    # A terminal's Ctrl-C reaches the whole process group: the parent stops the workers
    # (pool shutdown, or a kill), never a page failing halfway with KeyboardInterrupt.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The pool stops its workers with SIGTERM at every run's end (and a page over its
    # timeout). pebble's handler runs multiprocessing's exit functions inside the signal
    # handler, re-entered when the closed channel already had the worker exiting: what it
    # raised there escaped as a traceback on the user's stderr (seen once in CI, cut off by
    # the SIGKILL that follows). A worker holds nothing to clean up: it leaves at once,
    # with the same exit code (the signal's number) pebble gives it.
    signal.signal(signal.SIGTERM, _exit_at_once)


def _exit_at_once(signum: int, _frame: object) -> None:
    os._exit(signum)


def _start_fork_server() -> None:
    """Start the fork server with Ctrl-C ignored, when called from the main thread.

    A terminal's Ctrl-C reaches the whole process group. The fork server ignores SIGINT
    only once its imports are done (the whole CLI, a second or more), so a Ctrl-C in the
    first seconds of a run printed its KeyboardInterrupt traceback on the user's stderr
    (seen in CI). An ignored signal stays ignored across exec, and Python keeps it so.
    Meanwhile SIGINT is blocked here, not dropped: a Ctrl-C in that window reaches the
    run's own handler as soon as it is restored. Elsewhere pebble starts the server on
    first use, as before (only the main thread may set a handler).
    """
    from multiprocessing import forkserver

    handler = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or handler is None:
        return
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            forkserver.ensure_running()
        finally:
            signal.signal(signal.SIGINT, handler)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


class RenderPool:
    """Owns the worker processes; ``async`` methods are safe to call from one event loop."""

    def __init__(self, workers: int, *, page_timeout_s: float, memory_mb: int) -> None:
        self.workers = workers
        self.page_timeout_s = page_timeout_s
        context = multiprocessing.get_context("forkserver")
        # Workers fork from a server that imported the program (``__main__``: a worker
        # imports it before its first job, the whole CLI, ~1.3 s on a 16-core GPU host) and
        # PDFium and Pillow once, instead of each worker importing them again.
        context.set_forkserver_preload(["__main__", render_pages.__module__])
        _start_fork_server()
        self._pool = ProcessPool(
            max_workers=workers,
            max_tasks=500,  # recycle workers now and then: PDFium keeps caches
            initializer=_limit_memory,
            initargs=(memory_mb,),
            context=context,
        )
        self._slots = asyncio.Semaphore(workers * 2)
        # pebble starts its workers at the first job, and that start waits for the fork
        # server's imports: start them now, in a thread, while the caller plans its work
        # and opens its engine; jobs wait for it (``_run``) without blocking the loop.
        self._started = threading.Event()
        threading.Thread(target=self._start, name="render-pool-start", daemon=True).start()

    def _start(self) -> None:
        try:
            self._pool.schedule(os.getpid)
        finally:
            self._started.set()

    async def probe(self, job: ProbeJob) -> DocumentProbe:
        """Open a document in a worker and count its pages."""
        try:
            return await self._run(probe_document, job, _OPEN_ALLOWANCE_S + self.page_timeout_s)
        except FutureTimeout:
            return DocumentProbe(reason=Reason.TIMEOUT, error="opening the document timed out")
        except ProcessExpired as exc:
            return DocumentProbe(reason=_crash_reason(exc), error=_crash_message(exc))

    async def render(self, job: PageJob) -> list[RenderedPage]:
        """Render a job's pages; a timeout or crash is narrowed down to single pages."""
        timeout = _OPEN_ALLOWANCE_S + self.page_timeout_s * len(job.pages)
        try:
            return await self._run(render_pages, job, timeout)
        except (FutureTimeout, ProcessExpired) as exc:
            if len(job.pages) > 1:
                singles = [_single(job, page) for page in job.pages]
                parts = await asyncio.gather(*(self.render(s) for s in singles))
                return [page for part in parts for page in part]
            return [_failed_page(job.pages[0], exc, self.page_timeout_s)]

    async def _run(self, fn: Callable[[_Job], _Result], job: _Job, timeout: float) -> _Result:
        if not self._started.is_set():
            await asyncio.to_thread(self._started.wait)
        async with self._slots:
            future = self._pool.schedule(fn, args=(job,), timeout=timeout)
            return await asyncio.wrap_future(future)

    def close(self) -> None:
        """Stop the workers; pending jobs are dropped (the workspace makes them resumable)."""
        self._started.wait(timeout=60)  # a pool still starting would start after the stop
        # pebble stops its workers one by one, each SIGTERM waiting for its exit: signal
        # them all first, so that 16 workers leave in the time of one.
        # (pebble's own bookkeeping, read defensively: without it, the sequential stop.)
        try:
            processes = list(self._pool._pool_manager.worker_manager.workers.values())
        except (AttributeError, RuntimeError):  # another version, or a worker being replaced
            processes = []
        for process in processes:
            with contextlib.suppress(OSError, ValueError, AttributeError):
                process.terminate()
        self._pool.stop()
        self._pool.join(timeout=10)


def _single(job: PageJob, page: int) -> PageJob:
    return PageJob(
        job.path, job.kind, (page,), job.spec, job.password, job.rotations, job.force_image
    )


def _failed_page(page: int, exc: BaseException, timeout_s: float) -> RenderedPage:
    if isinstance(exc, ProcessExpired):
        return RenderedPage(page, reason=_crash_reason(exc), error=_crash_message(exc))
    return RenderedPage(page, reason=Reason.TIMEOUT, error=f"rendering took over {timeout_s:.0f} s")


def _crash_reason(exc: ProcessExpired) -> str:
    # An abort (SIGABRT) or kill inside PDFium under the memory cap almost always means an
    # allocation it could not make.
    return Reason.TOO_LARGE if exc.exitcode in (-6, -9) else Reason.RENDER_ERROR


def _crash_message(exc: ProcessExpired) -> str:
    return f"render worker died (exit code {exc.exitcode}) on this page"
