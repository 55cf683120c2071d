"""The worker loop every executor runs: claim an item's lease, convert it, mark it done.

Any number of workers — one ``ocrflow run``, extra ``ocrflow worker`` processes on other
machines, Ray actors — share one workspace this way. Work is duplicated only after a lease
expires, and never duplicates output: outputs have deterministic names and are written
whole before the done marker, and a worker commits an item only after confirming, right
before, that its lease was not taken over while it worked (it may have been paused past
the expiry); otherwise it drops the item, which its new owner commits.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass
from typing import Any

from ocrflow.config import RunConfig
from ocrflow.errors import OcrflowError
from ocrflow.executors.item_loop import ItemLoop, WorkerOptions
from ocrflow.executors.pipeline_setup import build_pipeline, build_reader
from ocrflow.observe.metrics import Metrics
from ocrflow.observe.runstats import RunStats
from ocrflow.pipeline.documents import Progress
from ocrflow.readers.plain import PageReader
from ocrflow.readers.ready_gate import ReadyGate
from ocrflow.readers.session import EngineSession, open_engine
from ocrflow.render.pool import RenderPool
from ocrflow.workspace.records import RunRecord
from ocrflow.workspace.state import Workspace, store_call
from ocrflow.workspace.workitems import Manifest

log = logging.getLogger("ocrflow.worker")


@dataclass(frozen=True, slots=True)
class Lent:
    """Long-lived resources a caller lends to :func:`work`, which uses them and leaves them
    open, so that many short calls (a job service's slices of work) share one set."""

    #: Render processes (made for ``config.render``'s workers, page timeout and memory cap).
    pool: RenderPool | None = None
    #: An opened engine for ``config.engine``, instrumented already if metrics are wanted.
    session: EngineSession | None = None


async def work(
    config: RunConfig,
    workspace: Workspace,
    *,
    options: WorkerOptions | None = None,
    progress: Progress | None = None,
    metrics: Metrics | None = None,
    lent: Lent | None = None,
) -> RunStats:
    """Work on the run in ``workspace`` until no item is left; return what this worker did.
    ``metrics``: Prometheus metrics that hear about pages and time engine requests.
    ``lent``: a render pool and/or an opened engine to use (and leave open) instead of
    starting and opening new ones (a job service's slot works in many short calls)."""
    options = options or WorkerOptions()
    lent = lent or Lent()
    owner = options.resolved_owner()
    stats = RunStats(worker=owner)
    run_id = stats.run_id
    fingerprint = workspace.bind(config)
    pool = lent.pool or RenderPool(
        config.render.workers,
        page_timeout_s=config.render.page_timeout_s,
        memory_mb=config.render.worker_memory_mb,
    )
    pool_closing: asyncio.Task[None] | None = None
    try:
        async with (
            _engine_session(config, workspace, lent.session) as session,
            _recording(workspace, stats, run_id, owner),
        ):
            if metrics is not None and lent.session is None:  # a lent one is the lender's
                session = dataclasses.replace(session, engine=metrics.instrument(session.engine))
            reader: PageReader = build_reader(config, session, workspace)
            if session.ready is not None:
                reader = ReadyGate(reader, session.ready)
            listeners: list[Progress] = [x for x in (stats, progress, metrics) if x is not None]
            pipeline = build_pipeline(
                config,
                workspace,
                session,
                reader,
                pool=pool,
                listeners=listeners,
                owner=owner,
                fingerprint=fingerprint,
            )
            try:
                loop = ItemLoop(
                    pipeline, workspace, options, owner, fingerprint, stats, config=config
                )
                await _unless_start_fails(loop.run(), session.ready)
                if session.wind_down is not None and lent.session is None:
                    await session.wind_down()  # servers stop while the outputs are written
                if lent.pool is None:  # every page is rendered: the workers leave meanwhile too
                    pool_closing = asyncio.create_task(asyncio.to_thread(pool.close))
                await pipeline.close_outputs()
                if "parquet" in config.out.formats:
                    await store_call(_finalize_shards, workspace)
            finally:
                await reader.aclose()
    finally:
        if pool_closing is not None:
            await pool_closing
        elif lent.pool is None:
            pool.close()
    return stats


@contextlib.asynccontextmanager
async def _engine_session(
    config: RunConfig, workspace: Workspace, lent: EngineSession | None
) -> AsyncIterator[EngineSession]:
    """The lent session as it is (its lender closes it), else one opened for this call."""
    if lent is not None:
        yield lent
        return
    # Pages render while the servers start: the reader's gate holds them until ready.
    async with open_engine(config.engine, log_dir=workspace.log_dir(), ready_later=True) as session:
        yield session


async def _unless_start_fails(
    work: Coroutine[Any, Any, None], ready: asyncio.Task[None] | None
) -> None:
    """Run ``work`` while the engine starts (``ready``). If the start fails, cancel the
    work (claimed items are released, nothing half-done is marked done) and raise why.
    Work that ends first (no page needed the engine) still waits for the start, so that a
    misconfigured engine fails the run as it did when it was checked first."""
    if ready is None:
        await work
        return
    task = asyncio.get_running_loop().create_task(work)
    try:
        await asyncio.wait({task, ready}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        task.cancel()
        raise
    if task.done():
        task.result()  # the work's own error, if any
        await asyncio.shield(ready)
        return
    error = ready.exception()
    if error is not None:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        raise error
    await task


@contextlib.asynccontextmanager
async def _recording(
    workspace: Workspace, stats: RunStats, run_id: str, owner: str
) -> AsyncIterator[None]:
    """Keep this worker's run record fresh (status shows live workers), and final at exit."""

    def save() -> None:
        record = {**stats.record(run_id, owner), "heartbeat": time.time()}
        workspace.record_run(RunRecord.model_validate(record))

    async def refresh() -> None:
        while True:
            await asyncio.sleep(10)
            try:
                await asyncio.to_thread(save)
            except (OcrflowError, OSError) as exc:
                # Nobody awaits this task: an error would end it unseen but for asyncio's
                # "Task exception was never retrieved" (a full disk did that). The record
                # is tried again at the next beat and at the end, where a failure stops the
                # run with its one error line; a warning here would only come before it.
                log.debug("could not record this run's progress: %s", exc)

    task = asyncio.get_running_loop().create_task(refresh())
    try:
        yield
    finally:
        task.cancel()
        stats.finished = time.time()
        save()


def _finalize_shards(workspace: Workspace) -> None:
    """Make the Parquet shards exact (one row an id, only done documents) once the run has
    no unfinished item. Each worker does this at its end; while items are still unfinished
    (other workers at work) it only removes duplicate rows, which is safe beside writers: a
    row is dropped only when a newer row of its id exists, and shards are never appended to.
    Dropping rows without a done marker waits until every item is done, because a worker's
    shard is on disk a moment before its done markers."""
    from ocrflow.sinks.parquet import finalize_shards  # pyarrow: only with --format parquet

    finished = Manifest(workspace.store).unfinished() == 0
    done_ids = workspace.done_ids() if finished else None
    finalize_shards(workspace.store, done_ids)
