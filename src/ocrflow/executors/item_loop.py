"""The item loop of one worker: pass over the manifest, claim each item's lease, convert
the item (a whole document, or one page range of a long one), and commit it only while
the lease is still ours."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from ocrflow.config import RunConfig
from ocrflow.errors import OcrflowError, SourceError
from ocrflow.executors.pipeline_setup import page_budget
from ocrflow.inputs.copies import RowFetcher
from ocrflow.observe.runstats import RunStats
from ocrflow.pipeline.documents import (
    CHUNK_PAGES,
    DocumentJob,
    DocumentPipeline,
    OpenedDocument,
    content_hash,
    document_id,
)
from ocrflow.storage.names import local_path
from ocrflow.types import DocumentResult
from ocrflow.workspace.leases import Lease, LeaseLost, LeaseManager, claim_in_thread, new_owner
from ocrflow.workspace.records import DoneRecord, WorkItem
from ocrflow.workspace.state import Workspace, result_from_done, store_call
from ocrflow.workspace.workitems import Manifest, join_item, range_items

log = logging.getLogger("ocrflow.worker")


@dataclass(frozen=True, slots=True)
class WorkerOptions:
    """How one worker takes part in a run."""

    owner: str = ""
    lease_ttl_s: float = 120.0
    #: A static shard (``executors.shards``, ``--shard I/N``): only the items whose
    #: ``WorkItem.shard(num_shards)`` is ``shard_index``; ``None``: every item.
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
        *,
        config: RunConfig,
    ) -> None:
        self.pipeline = pipeline
        self.stats = stats or RunStats()
        self.workspace = workspace
        self.manifest = Manifest(workspace.store)
        self.options = options
        self.leases = LeaseManager(workspace.store, owner, ttl_s=options.lease_ttl_s)
        self.fingerprint = fingerprint
        self.slots = asyncio.Semaphore(options.max_items_in_flight or _document_slots(config))
        self._queue: deque[WorkItem] = deque()
        self._wake = asyncio.Event()
        self._rng = random.Random(owner)
        # Leases of items whose outputs wait in a buffer (Parquet) for their commit: kept,
        # and renewed, until then, so that no other worker converts the item again.
        self._kept: set[str] = set()
        self._keepers: set[asyncio.Task[None]] = set()
        # Dataset rows are read through one forward cursor per dataset (see dataset_source).
        self.rows = RowFetcher(config.input.dataset_column, config.input.access)

    def pending(self) -> list[WorkItem]:
        """Items of this worker's shard not done yet, in a worker-specific order so that
        workers starting together do not all fight over the first item."""
        items = [i for i in self.manifest.open_items() if self._mine(i)]
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
            marker = self.workspace.done_record(doc_id)
            if marker is None and record is not None and record.status == "split":
                continue  # not assembled yet: this run counts it when its join item is done
            marker = marker or DoneRecord(doc_id=doc_id, source="")
            result = result_from_done(marker.model_copy(update={"source": item.uri}))
            self.pipeline.progress.document_finished(item.source, result, skipped=True)

    def _mine(self, item: WorkItem) -> bool:
        shards = self.options.num_shards
        return not shards or item.shard(shards) == (self.options.shard_index or 0)

    async def run(self) -> None:
        try:
            await self._run()
        finally:
            # Each pass ends with a flush that commits the kept items, so only a failed run
            # leaves keepers waiting: they let their leases go (the items are not done).
            for keeper in self._keepers:
                keeper.cancel()
            await asyncio.gather(*self._keepers, return_exceptions=True)

    async def _run(self) -> None:
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
                lease = await claim_in_thread(self.leases, functools.partial(self._claim, item))
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
            if item.item_id not in self._kept:
                await asyncio.to_thread(self.leases.release, lease)
            self.slots.release()

    def _keep_until(self, committed: asyncio.Event, item: WorkItem, lease: Lease) -> None:
        """Hold (and renew) the item's lease until its commit; the item's task ends now."""
        self._kept.add(item.item_id)

        async def keep() -> None:
            try:
                async with self.leases.held(lease):
                    await committed.wait()
            finally:
                self._kept.discard(item.item_id)
                try:
                    await asyncio.to_thread(self.leases.release, lease)
                except (OcrflowError, OSError) as exc:
                    # Nobody awaits a keeper: the error would surface only as asyncio's
                    # "Task exception was never retrieved" (a full disk did that). The lease
                    # just expires; whatever broke OUT stops the run where it is written, with
                    # its one error line.
                    log.debug("could not let go of lease %s: %s", lease.key, exc)

        keeper = asyncio.get_running_loop().create_task(keep())
        self._keepers.add(keeper)
        keeper.add_done_callback(self._keepers.discard)

    def _abandoned(self, item: WorkItem) -> None:
        # The item's new owner converts and commits it; our pages stay counted as work done.
        log.warning("dropped %s: another worker took it over after our lease expired", item.rel)
        self.stats.leases_lost += 1

    async def _confirm(self, lease: Lease) -> None:
        """Raise ``LeaseLost`` unless the item is still ours (call right before a commit;
        the commit that follows must not await, so nothing can come in between)."""
        await asyncio.to_thread(self.leases.confirm, lease)

    async def _process(self, item: WorkItem, lease: Lease) -> None:
        if item.is_join and await self._joined_before(item):
            return
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
                if item.is_join:
                    await self._process_join(item, job, lease)
                elif item.is_range:
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
            committed = asyncio.Event()
            await pipeline.finish(job, opened, results, then=item_done, committed=committed)
            if not committed.is_set():
                self._keep_until(committed, item, lease)

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
        # Whoever completes the last range queues the join (each range is marked done
        # before this check, so at least one worker sees them all done). A worker killed
        # before its join leaves the join item open: every worker's next pass finds it.
        siblings = self.manifest.ranges(item.item_id.split("@", 1)[0])
        if all(self.manifest.item_done(s.item_id) for s in siblings):
            self._queue.append(join_item(siblings))
            self._wake.set()

    async def _joined_before(self, join: WorkItem) -> bool:
        """Mark a join done whose document is committed already (its assembler was killed
        before it marked the join, or an older ocrflow assembled it without a join item),
        without fetching the source."""
        if await store_call(self.workspace.done_record, join.doc_id) is None:
            return False
        await store_call(self.workspace.clear_pages, join.doc_id)
        await store_call(self.manifest.mark_item_done, join, join.doc_id, "done")
        return True

    async def _process_join(self, item: WorkItem, job: DocumentJob, lease: Lease) -> None:
        """Assemble a split document from its ranges' page checkpoints."""
        join_done = functools.partial(self.manifest.mark_item_done, item, job.doc_id, "done")
        opened = await self.pipeline.open(job)
        if isinstance(opened, DocumentResult):  # the source went since its ranges were read
            await self._confirm(lease)
            await self.pipeline.finish_failed(job, opened, then=join_done)
            return
        saved = await store_call(self.workspace.load_pages, job.doc_id)
        missing = [p for p in opened.pages if p not in saved]
        if missing:
            # A checkpoint is gone (a figure crop lost, a file removed by hand): convert its
            # range again rather than commit a document without the page.
            log.warning("%s: pages %s lost their checkpoints; converting again", item.rel, missing)
            await store_call(self.manifest.reopen_ranges, item, missing)
            return
        await self._confirm(lease)
        # Its ranges are done already: the document must be durable before we go on.
        results = [saved[p] for p in opened.pages]
        await self.pipeline.finish(job, opened, results, flush=True, then=join_done)


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
