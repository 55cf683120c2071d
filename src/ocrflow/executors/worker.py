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
import functools
import logging
import random
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from ocrflow.config import EngineOptions, RunConfig
from ocrflow.dataset_source import RowFetcher
from ocrflow.engines.factory import build_engine
from ocrflow.engines.session import EngineSession, open_engine
from ocrflow.errors import SourceError
from ocrflow.leases import Lease, LeaseLost, LeaseManager, new_owner
from ocrflow.metrics import Metrics
from ocrflow.names import local_path
from ocrflow.pipeline import (
    CHUNK_PAGES,
    DocumentJob,
    DocumentPipeline,
    OpenedDocument,
    PageBudget,
    Progress,
    content_hash,
    document_id,
)
from ocrflow.reader import PageReader, PlainReader
from ocrflow.records import DoneRecord, RunRecord
from ocrflow.render.pool import RenderPool
from ocrflow.runstats import RunStats
from ocrflow.sinks import Outputs
from ocrflow.sinks.parquet import finalize_shards
from ocrflow.types import DocumentResult
from ocrflow.workitems import Manifest, WorkItem, range_items
from ocrflow.workspace import Workspace, result_from_done, store_call

log = logging.getLogger("ocrflow.worker")


@dataclass(frozen=True, slots=True)
class WorkerOptions:
    """How one worker takes part in a run."""

    owner: str = ""
    lease_ttl_s: float = 120.0
    shard_index: int | None = None
    num_shards: int | None = None
    #: Documents with more selected pages than this are split into items of this size.
    split_pages: int = 500
    #: Seconds between looks at the item list while other workers hold the rest.
    idle_poll_s: float = 2.0
    #: Count documents finished by earlier runs in this worker's tally (one reporter only).
    report_finished_before: bool = True
    #: Asked before each claim: ``True`` stops claiming (items in flight finish) and ends
    #: ``work`` early, e.g. to give a job service's worker to another job (fair share).
    should_stop: Callable[[], bool] | None = None
    #: Items worked on at once (default: enough small documents to fill the page budget);
    #: a low value lets ``should_stop`` take effect after a few items.
    max_items_in_flight: int | None = None

    def stopping(self) -> bool:
        """Whether the worker should claim nothing more."""
        return self.should_stop is not None and self.should_stop()

    def resolved_owner(self) -> str:
        """The owner name of this worker's leases (``host:pid:random`` unless given)."""
        return self.owner or new_owner()


@dataclass(frozen=True, slots=True)
class Lent:
    """Long-lived resources a caller lends to :func:`work`, which uses them and leaves them
    open, so that many short calls (a job service's slices of work) share one set."""

    #: Render processes (made for ``config.render``'s workers, page timeout and memory cap).
    pool: RenderPool | None = None
    #: An opened engine for ``config.engine``, instrumented already if metrics are wanted.
    session: EngineSession | None = None


class FanOut:
    """Sends progress events to several listeners."""

    def __init__(self, *listeners: Progress) -> None:
        self.listeners = listeners

    def document_started(self, source, pages):  # type: ignore[no-untyped-def]
        for listener in self.listeners:
            listener.document_started(source, pages)

    def pages_finished(self, results):  # type: ignore[no-untyped-def]
        for listener in self.listeners:
            listener.pages_finished(results)

    def document_finished(self, source, result, skipped):  # type: ignore[no-untyped-def]
        for listener in self.listeners:
            listener.document_finished(source, result, skipped)


def build_reader(config: RunConfig, session: EngineSession) -> PageReader:
    """The page reader for the engine: plain text, or a recipe with retries and fallbacks."""
    if session.recipe is None:
        return PlainReader(session.engine)
    from ocrflow.policy import AttemptPolicy, TransportPolicy
    from ocrflow.second_pass import second_pass_for
    from ocrflow.vlm_reader import VlmReader

    options, passes = config.engine, config.passes
    second_pass = second_pass_for(
        session.recipe, passes.roi_labels, passes.retry_large_cap, passes.required_labels
    )
    return VlmReader(
        session.engine,
        session.recipe,  # type: ignore[arg-type]
        transport=TransportPolicy(
            page_deadline_s=options.page_deadline_s, request_timeout_s=options.request_timeout_s
        ),
        attempts=AttemptPolicy(max_page_error_rate=options.max_page_error_rate),
        fallback_engine=lambda: build_engine(EngineOptions(kind="embedded")),
        second_pass=second_pass,
        first_pass_dim=page_dim(config, session) if second_pass else None,
    )


def page_dim(config: RunConfig, session: EngineSession) -> int:
    """The longest side of the image the engine's first read gets."""
    return config.render.target_dim or session.target_dim


def render_dim(config: RunConfig, session: EngineSession) -> int:
    """The longest side pages are rendered at: the first read's, or the second passes'
    resolution when they are on (the reader shrinks the page for its first read)."""
    passes = config.passes
    if session.recipe is not None and (passes.roi_labels or passes.retry_large_cap):
        from ocrflow.second_pass import HIRES_DIM

        return max(page_dim(config, session), HIRES_DIM)
    return page_dim(config, session)


#: Pages in flight per replica that an adaptive limit may use. Measured on one H100 with
#: olmOCR-2 (fp8 KV cache): vLLM's batch held ~350 requests; a budget of 256 capped ocrflow
#: below that (0.84-0.91 of a bare client). A page costs ~0.1-0.3 MB while it waits.
ADAPTIVE_PAGES_PER_REPLICA = 512


def page_budget(config: RunConfig) -> int:
    """How many pages may be rendered and not yet read: enough to keep the engine busy."""
    render_ahead = CHUNK_PAGES * config.render.workers * 2
    if config.engine.kind in {"embedded", "tesseract"}:
        return max(render_ahead, 32)
    replicas = max(1, len(config.engine.servers), len(config.engine.gpus))
    concurrency = config.engine.max_concurrency or ADAPTIVE_PAGES_PER_REPLICA
    return render_ahead + concurrency * replicas + CHUNK_PAGES * 4


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
    try:
        async with (
            _engine_session(config, workspace, lent.session) as session,
            _recording(workspace, stats, run_id, owner),
        ):
            if metrics is not None and lent.session is None:  # a lent one is the lender's
                session = dataclasses.replace(session, engine=metrics.instrument(session.engine))
            reader = build_reader(config, session)
            listeners = [x for x in (stats, progress, metrics) if x is not None]
            pipeline = DocumentPipeline(
                config,
                pool=pool,
                reader=reader,
                workspace=workspace,
                outputs=Outputs(
                    config.out.formats,
                    workspace.store,
                    owner,
                    page_separator=config.out.page_separator,
                ),
                budget=PageBudget(page_budget(config)),
                progress=FanOut(*listeners) if len(listeners) > 1 else stats,  # type: ignore[arg-type]
                fingerprint=fingerprint,
                engine_name=session.label,
                target_dim=render_dim(config, session),
            )
            try:
                await ItemLoop(pipeline, workspace, options, owner, fingerprint, stats).run()
                await pipeline.close_outputs()
                if "parquet" in config.out.formats:
                    await store_call(_finalize_shards, workspace)
            finally:
                await reader.aclose()
    finally:
        if lent.pool is None:
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
    async with open_engine(config.engine, log_dir=workspace.log_dir()) as session:
        yield session


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
            await asyncio.to_thread(save)

    task = asyncio.get_running_loop().create_task(refresh())
    try:
        yield
    finally:
        task.cancel()
        stats.finished = time.time()
        save()


class ItemLoop:
    """Passes over the manifest until every item (of this shard) is done."""

    def __init__(
        self,
        pipeline: DocumentPipeline,
        workspace: Workspace,
        options: WorkerOptions,
        owner: str,
        fingerprint: str,
        stats: RunStats | None = None,
    ) -> None:
        self.pipeline = pipeline
        self.stats = stats or RunStats()
        self.workspace = workspace
        self.manifest = Manifest(workspace.store)
        self.options = options
        self.leases = LeaseManager(workspace.store, owner, ttl_s=options.lease_ttl_s)
        self.fingerprint = fingerprint
        self.slots = asyncio.Semaphore(
            options.max_items_in_flight or _document_slots(pipeline.config)
        )
        self._queue: deque[WorkItem] = deque()
        self._wake = asyncio.Event()
        self._rng = random.Random(owner)
        # Dataset rows are read through one forward cursor per dataset (see dataset_source).
        self.rows = RowFetcher(pipeline.config.input.dataset_column, pipeline.config.input.access)

    def pending(self) -> list[WorkItem]:
        """Items of this worker's shard not done yet, in a worker-specific order so that
        workers starting together do not all fight over the first item."""
        done = self.manifest.done_item_ids()
        items = [
            i
            for i in (*self.manifest.items(), *self.manifest.all_ranges())
            if i.item_id not in done and self._mine(i)
        ]
        if len(items) > 1:
            start = self._rng.randrange(len(items))
            items = items[start:] + items[:start]
        return items

    def _report_finished_before(self) -> None:
        """Count documents finished by earlier runs, with their status, in this run's tally."""
        done = self.manifest.done_item_ids()
        for item in self.manifest.items():
            if item.item_id not in done or not self._mine(item):
                continue
            record = self.manifest.item_done(item.item_id)
            doc_id = record.doc_id if record else ""
            marker = self.workspace.done_record(doc_id) or DoneRecord(doc_id=doc_id, source="")
            result = result_from_done(marker.model_copy(update={"source": item.uri}))
            self.pipeline.progress.document_finished(item.source, result, skipped=True)

    def _mine(self, item: WorkItem) -> bool:
        shards = self.options.num_shards
        return not shards or item.shard(shards) == (self.options.shard_index or 0)

    async def run(self) -> None:
        if self.options.report_finished_before:
            await asyncio.to_thread(self._report_finished_before)
        while True:
            # Buffered outputs (Parquet rows) commit their documents before the item list is
            # read again: a document written but not committed is not done yet.
            await self.pipeline.flush_outputs()
            if self.options.stopping():
                return
            items = await asyncio.to_thread(self.pending)
            if not items:
                return
            claimed = await self._pass(items)
            if not claimed:  # everything left is leased by others: wait for them
                await asyncio.sleep(self.options.idle_poll_s)

    async def _pass(self, items: list[WorkItem]) -> int:
        """Claim and work items until the queue is empty and nothing running can add more
        (a document split into ranges adds them here, so they start at once)."""
        self._queue.extend(items)
        claimed = 0
        running: set[asyncio.Task[None]] = set()
        async with asyncio.TaskGroup() as group:
            while self._queue or running:
                if not self._queue:
                    self._wake.clear()
                    await self._wake.wait()
                    continue
                if self.options.stopping():
                    self._queue.clear()  # let what runs finish; claim nothing more
                    continue
                item = self._queue.popleft()
                await self.slots.acquire()
                lease = await asyncio.to_thread(self._claim, item)
                if lease is None:
                    self.slots.release()
                    continue
                claimed += 1
                task = group.create_task(self._guarded(item, lease))
                running.add(task)
                task.add_done_callback(self._finished(running))
        return claimed

    def _finished(self, running: set[asyncio.Task[None]]) -> Callable[[asyncio.Task[None]], None]:
        def done(task: asyncio.Task[None]) -> None:
            running.discard(task)
            self._wake.set()

        return done

    def _claim(self, item: WorkItem) -> Lease | None:
        lease = self.leases.claim(item.item_id)
        if lease is not None and self.manifest.item_done(item.item_id) is not None:
            self.leases.release(lease)  # finished by someone else since our listing
            return None
        return lease

    async def _guarded(self, item: WorkItem, lease: Lease) -> None:
        try:
            async with self.leases.held(lease):
                await self._process(item, lease)
        except LeaseLost:
            self._abandoned(item)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if not lease.lost or task is None:
                raise
            task.uncancel()  # the heartbeat found the lease taken over and stopped the item
            self._abandoned(item)
        finally:
            await asyncio.to_thread(self.leases.release, lease)
            self.slots.release()

    def _abandoned(self, item: WorkItem) -> None:
        # The item's new owner converts and commits it; our pages stay counted as work done.
        log.warning("dropped %s: another worker took it over after our lease expired", item.rel)
        self.stats.leases_lost += 1

    async def _confirm(self, lease: Lease) -> None:
        """Raise ``LeaseLost`` unless the item is still ours (call right before a commit;
        the commit that follows must not await, so nothing can come in between)."""
        await asyncio.to_thread(self.leases.confirm, lease)

    async def _process(self, item: WorkItem, lease: Lease) -> None:
        with contextlib.ExitStack() as copies:
            path, failure = await asyncio.to_thread(_local_file, copies, item.uri, self.rows)
            digest = await asyncio.to_thread(_hash_or_empty, path)
            doc_id = item.doc_id or document_id(digest, self.fingerprint, item.rel)
            # Not readable now (refused by the access policy, too large, gone): the source
            # carries the reason as its kind and the document fails unopened.
            source = (
                item.source if failure is None else dataclasses.replace(item.source, kind=failure)
            )
            job = DocumentJob(source, item.rel, doc_id, digest, path)
            try:
                if item.is_range:
                    await self._process_range(item, job, lease)
                else:
                    await self._process_document(item, job, lease)
            except (LeaseLost, asyncio.CancelledError):
                if lease.lost:
                    self._drop_late_checkpoints(doc_id)
                raise

    def _drop_late_checkpoints(self, doc_id: str) -> None:
        """Remove page checkpoints we wrote after the new owner committed the document (it
        clears the checkpoints it finds at its commit; ours may have come later)."""
        if self.workspace.done_record(doc_id) is not None:
            self.workspace.clear_pages(doc_id)

    async def _process_document(self, item: WorkItem, job: DocumentJob, lease: Lease) -> None:
        pipeline = self.pipeline
        # The item is done once its document is committed: with a buffering sink (Parquet)
        # that is when the shard holding its row is written, possibly after this returns.
        item_done = functools.partial(self.manifest.mark_item_done, item, job.doc_id, "done")
        if await pipeline.report_if_done(job):
            await store_call(item_done)
            return
        opened = await pipeline.open(job)
        if isinstance(opened, DocumentResult):
            await self._confirm(lease)
            await pipeline.finish_failed(job, opened, then=item_done)
        elif len(opened.pages) > self.options.split_pages:
            await self._confirm(lease)
            self._split(item, job, opened)
        else:
            pipeline.progress.document_started(job.source, len(opened.pages))
            results = await pipeline.convert_pages(job, opened.pages, opened.password)
            await self._confirm(lease)
            await pipeline.finish(job, opened, results, then=item_done)

    def _split(self, item: WorkItem, job: DocumentJob, opened: OpenedDocument) -> None:
        """Turn a long document into range items and start them at once (here and in other
        workers); the parent item is done once the split is recorded."""
        ranges = range_items(item, job.doc_id, opened.pages, self.options.split_pages)
        ranges = self.manifest.split(item, ranges)
        self.pipeline.progress.document_started(job.source, len(opened.pages))
        self.manifest.mark_item_done(item, job.doc_id, "split")
        self._queue.extend(ranges)
        self._wake.set()

    async def _process_range(self, item: WorkItem, job: DocumentJob, lease: Lease) -> None:
        opened = await self.pipeline.open(job)
        if isinstance(opened, DocumentResult):
            await self._confirm(lease)
            item_done = functools.partial(self.manifest.mark_item_done, item, job.doc_id, "done")
            await self.pipeline.finish_failed(job, opened, then=item_done)
            return
        pages = tuple(p for p in opened.pages if item.first <= p <= item.last)
        await self.pipeline.convert_pages(job, pages, opened.password)
        await self._confirm(lease)
        self.manifest.mark_item_done(item, job.doc_id, "range")
        await self._finish_split_document(item, job, opened)

    async def _finish_split_document(
        self, item: WorkItem, job: DocumentJob, opened: OpenedDocument
    ) -> None:
        """Whoever completes the last range assembles the document (each range is marked
        done before this check, so at least one worker sees them all done)."""
        parent_id = item.item_id.split("@", 1)[0]
        siblings = self.manifest.ranges(parent_id)
        finished = all(self.manifest.item_done(s.item_id) for s in siblings)
        if finished and self.workspace.done_record(job.doc_id) is None:
            # Its ranges are done already: the document must be durable before we go on.
            await self.pipeline.finish(job, opened, flush=True)


def _document_slots(config: RunConfig) -> int:
    # Enough documents open at once to fill the page budget with small documents.
    return max(4, config.render.workers * 2, page_budget(config) // CHUNK_PAGES)


def _local_file(copies: contextlib.ExitStack, uri: str, rows: RowFetcher) -> tuple[str, str | None]:
    """A local path holding the item's bytes and ``None``; or ``""`` and why it cannot be
    read (nothing of it is read then, not even hashed: a device or FIFO never ends)."""
    try:
        return copies.enter_context(rows.local_copy(local_path(uri))), None
    except SourceError as exc:
        return "", str(exc.reason)


def _hash_or_empty(path: str) -> str:
    try:
        return content_hash(path)  # bounded: a regular file, read up to its size
    except OSError:
        return "unreadable"


def _finalize_shards(workspace: Workspace) -> None:
    """Make the Parquet shards exact (one row an id, only done documents) once the run has
    no unfinished item. Each worker does this at its end; while items are still unfinished
    (other workers at work) it only removes duplicate rows, which is safe beside writers: a
    row is dropped only when a newer row of its id exists, and shards are never appended to.
    Dropping rows without a done marker waits until every item is done, because a worker's
    shard is on disk a moment before its done markers."""
    manifest = Manifest(workspace.store)
    done = manifest.done_item_ids()
    finished = all(i.item_id in done for i in (*manifest.items(), *manifest.all_ranges()))
    done_ids = workspace.done_ids() if finished else None
    finalize_shards(workspace.store, done_ids)
