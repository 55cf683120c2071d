"""Page → document orchestration: probe, render in chunks, route, read, checkpoint, assemble.

Memory is bounded by ``PageBudget``: a page holds a slot from just before it is rendered
until its text is known, so at most ``budget`` page images exist at any moment, however many
documents or pages the run has.
"""

from __future__ import annotations

import asyncio
import errno
import hashlib
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from pydantic import SecretStr

from ocrflow.cancellation import run_to_end
from ocrflow.config import OutputOptions, PassOptions, RenderOptions, RouteOptions
from ocrflow.config.pagespec import select_pages
from ocrflow.inputs.expand import refusal
from ocrflow.inputs.source import Source
from ocrflow.pipeline.assembly import assemble_document
from ocrflow.pipeline.route import route_page, settled_page
from ocrflow.readers.markdown_clean import clean_page
from ocrflow.readers.plain import PageReader
from ocrflow.render.jobs import PageJob, ProbeJob, RenderedPage, RenderSpec
from ocrflow.render.pool import RenderPool
from ocrflow.render.resolution import Resolution
from ocrflow.sinks import DocumentMeta, FinishedDocument, OriginalFile, Outputs
from ocrflow.storage.names import local_path
from ocrflow.types import (
    DocStatus,
    DocumentResult,
    PageKey,
    PageResult,
    Reason,
    Route,
)
from ocrflow.workspace.state import Workspace, result_from_done, store_call, store_write

CHUNK_PAGES = 8


def render_chunks(pages: list[int]) -> list[tuple[int, ...]]:
    """``pages`` in render jobs of ``CHUNK_PAGES``, the first of a longer document alone:
    its engine gets a page after one render, not eight (a server sits idle meanwhile)."""
    head = pages[:1] if len(pages) > CHUNK_PAGES else []
    rest = pages[len(head) :]
    chunks = [tuple(rest[i : i + CHUNK_PAGES]) for i in range(0, len(rest), CHUNK_PAGES)]
    return [tuple(head), *chunks] if head else chunks


class Progress(Protocol):
    """Hears about work as it happens (progress bars, logs, run statistics)."""

    def document_started(self, source: Source, pages: int) -> None: ...

    def pages_finished(self, results: list[PageResult]) -> None: ...

    def document_finished(self, source: Source, result: DocumentResult, skipped: bool) -> None: ...


class PageBudget:
    """A counting limiter that hands out several slots at once without deadlock."""

    def __init__(self, slots: int) -> None:
        self._slots = asyncio.Semaphore(slots)
        self._grab = asyncio.Lock()

    async def acquire(self, count: int) -> None:
        # One taker at a time: two takers each holding half of what they need would wait
        # for each other forever.
        async with self._grab:
            for _ in range(count):
                await self._slots.acquire()

    def release(self, count: int = 1) -> None:
        for _ in range(count):
            self._slots.release()


@dataclass(frozen=True, slots=True)
class DocumentJob:
    """A document to convert; ``path`` is a local file with its bytes ("" = the source)."""

    source: Source
    rel: str
    doc_id: str
    content_sha256: str
    path: str = ""

    @property
    def local_path(self) -> str:
        return self.path or self.source.uri


@dataclass(frozen=True, slots=True)
class PendingCommit:
    """A document whose outputs are written but not all durable yet (a Parquet row waits
    for its shard): its done marker, and ``then``, follow once they are."""

    job: DocumentJob
    result: DocumentResult
    then: Callable[[], None] | None = None
    #: Set once its done marker is written: by whichever task's write or flush made it
    #: durable (another document's write can flush the shard holding this one's row).
    committed: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass(frozen=True, slots=True)
class OpenedDocument:
    """A probed document: its page count, the pages selected, and the password that works."""

    page_count: int
    pages: tuple[int, ...]
    password: str | None


def content_hash(path: str) -> str:
    """SHA-256 of a local regular file, streamed; at most the size it had when opened is
    read, so a file still growing ends. ``OSError`` when it is not a regular file (a FIFO or
    a device swapped in since planning is never read: opened without blocking)."""
    digest = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
        left = info.st_size
        while left > 0 and (block := handle.read(min(1 << 20, left))):
            digest.update(block)
            left -= len(block)
    return digest.hexdigest()


def document_id(content_sha256: str, fingerprint: str, rel: str) -> str:
    """Deterministic id: the same bytes at the same place under the same settings."""
    blob = f"{content_sha256}\0{fingerprint}\0{rel}".encode()
    return hashlib.sha256(blob).hexdigest()[:24]


class DocumentPipeline:
    """Converts one document at a time (call ``convert`` concurrently for many).

    Of the run's configuration it takes the parts it uses: the page selection and the
    passwords to try, the render limits, the routing, the clean pass, the share of pages
    that may fall back, and how the outputs name a source."""

    def __init__(
        self,
        *,
        pages: str | None,
        passwords: tuple[SecretStr, ...],
        render: RenderOptions,
        route: RouteOptions,
        passes: PassOptions,
        out: OutputOptions,
        max_page_error_rate: float,
        pool: RenderPool,
        reader: PageReader,
        workspace: Workspace,
        outputs: Outputs,
        budget: PageBudget,
        progress: Progress,
        fingerprint: str,
        engine_name: str,
        resolution: Resolution,
        prompts: tuple[str, ...] = (),
    ) -> None:
        self.pages = pages
        self.passes = passes
        self.out = out
        self.max_page_error_rate = max_page_error_rate
        self.pool = pool
        self.reader = reader
        self.workspace = workspace
        self.outputs = outputs
        self._pending: dict[str, PendingCommit] = {}
        self.budget = budget
        self.progress = progress
        self.fingerprint = fingerprint
        self.engine_name = engine_name
        self.passwords = tuple(p.get_secret_value() for p in passwords)
        #: What the recipe asks, so the clean pass can strip a reply that repeats it.
        self.prompts = prompts
        self.spec = RenderSpec(
            target_dim=resolution.target_dim,
            dpi=resolution.dpi,
            max_scan_dpi=resolution.max_scan_dpi,
            max_pixels=render.max_pixels,
            max_page_points=render.max_page_points,
            max_image_pixels=render.max_image_pixels,
            text_layer=route.text_layer,
            encoding=reader.image_encoding,
        )

    async def report_if_done(self, job: DocumentJob) -> bool:
        """If the document finished in an earlier run, report it as skipped and say so."""
        done = await store_call(self.workspace.done_record, job.doc_id)
        if done is None:
            return False
        # A kill between the done marker and the checkpoint cleanup leaves checkpoints behind.
        await store_call(self.workspace.clear_pages, job.doc_id)
        self.progress.document_finished(job.source, result_from_done(done), skipped=True)
        return True

    async def open(self, job: DocumentJob) -> OpenedDocument | DocumentResult:
        """Probe the document: its pages and password, or a failed result saying why."""
        failure = _unreadable(job.source)
        if failure:
            return _failed(job, *failure)
        probe = await self.pool.probe(
            ProbeJob(job.local_path, job.source.kind, self.passwords, self.spec.max_image_pixels)
        )
        if probe.reason:
            return _failed(job, probe.reason, probe.error or probe.reason)
        password = (
            self.passwords[probe.password_index] if probe.password_index is not None else None
        )
        pages = select_pages(self.pages, probe.page_count)
        if not pages:
            return _failed(
                job, Reason.EMPTY, "the page selection matches no page", probe.page_count
            )
        return OpenedDocument(probe.page_count, pages, password)

    async def finish(
        self,
        job: DocumentJob,
        opened: OpenedDocument,
        results: list[PageResult],
        *,
        then: Callable[[], None] | None = None,
        flush: bool = False,
        committed: asyncio.Event | None = None,
    ) -> DocumentResult:
        """Assemble the document from its pages' ``results``, write its outputs and
        commit it once they are durable (``then`` runs right after its done marker).

        Outputs first, then the done marker, then checkpoints go: a kill at any point
        leaves either a finished document or one the next run completes. A buffering sink
        may hold the outputs back: the commit then happens at a later write or ``flush``
        (``flush=True`` flushes at once, and returns once the commit is done). ``committed``
        is set when it is done, whichever task commits it.
        """
        result = assemble_document(
            job.doc_id,
            job.source.uri,
            results,
            opened.page_count,
            max_fallback_rate=self.max_page_error_rate,
        )
        pending = PendingCommit(job, result, then, committed or asyncio.Event())
        self._pending[job.doc_id] = pending
        original = OriginalFile(job.local_path, job.source.kind, opened.password)
        finished = FinishedDocument(result, self._meta(job), original)
        durable = await store_call(self.outputs.write, finished)
        if flush:
            durable += await store_call(self.outputs.flush)
        await self._commit_durable(durable)
        if flush:
            # Durable now. A concurrent task's write may have drained its id: that task
            # commits it (the caller holds the item until then), unless it was cancelled
            # before it took the id from ``_pending``; then it is ours to commit.
            await self._commit_durable([job.doc_id])
            await pending.committed.wait()
        return result

    async def finish_failed(
        self, job: DocumentJob, result: DocumentResult, *, then: Callable[[], None] | None = None
    ) -> DocumentResult:
        """Commit a document that could not be opened (it has no outputs to wait for)."""
        await self._commit(PendingCommit(job, result, then))
        return result

    async def flush_outputs(self) -> None:
        """Make buffered outputs durable and commit their documents (before waiting or
        stopping: a document waits in a buffer at most until then)."""
        await self._commit_durable(await store_call(self.outputs.flush))

    async def close_outputs(self) -> None:
        """Flush and close every sink, committing what they held."""
        await self._commit_durable(await store_call(self.outputs.close))

    async def _commit_durable(self, doc_ids: list[str]) -> None:
        commits = [p for p in (self._pending.pop(d, None) for d in doc_ids) if p is not None]
        if commits:
            # Run to their end: these may be other tasks' documents (popped here, so nobody
            # else commits them), and this task being cancelled (its own lease lost, the run
            # stopping on another document's error) must not leave them written but
            # uncommitted. Their own error then goes with the cancellation, retrieved: once
            # left to a shielded task nobody awaited, asyncio printed it as a traceback.
            await run_to_end(self._commit_all(commits))

    async def _commit_all(self, commits: list[PendingCommit]) -> None:
        for pending in commits:
            await self._commit(pending)

    async def _commit(self, pending: PendingCommit) -> None:
        job, result = pending.job, pending.result
        try:
            await store_call(
                self.workspace.mark_done, result, rel=job.rel, content_sha256=job.content_sha256
            )
            await store_call(self.workspace.clear_pages, job.doc_id)
            if pending.then is not None:
                await store_call(pending.then)
        finally:
            pending.committed.set()  # a failed commit fails its run; no waiter hangs on it
        self.progress.document_finished(job.source, result, skipped=False)

    async def convert_pages(
        self, job: DocumentJob, pages: tuple[int, ...], password: str | None
    ) -> list[PageResult]:
        """Convert ``pages`` (skipping checkpointed ones), checkpointing as chunks finish."""
        done = await store_call(self.workspace.load_pages, job.doc_id)
        if done:
            self.progress.pages_finished([p for n, p in done.items() if n in pages])
        pending = [p for p in pages if p not in done]
        chunks = render_chunks(pending)
        parts = await asyncio.gather(*(self._convert_chunk(job, c, password) for c in chunks))
        return [done[p] for p in pages if p in done] + [r for part in parts for r in part]

    async def _convert_chunk(
        self, job: DocumentJob, pages: tuple[int, ...], password: str | None
    ) -> list[PageResult]:
        await self.budget.acquire(len(pages))
        try:
            rendered = await self.pool.render(
                PageJob(job.local_path, job.source.kind, pages, self.spec, password)
            )
            results = list(await asyncio.gather(*(self._finish_page(job, r) for r in rendered)))
        finally:
            self.budget.release(len(pages))
        await store_write(self.workspace.save_pages, job.doc_id, results)
        self.progress.pages_finished(results)
        return results

    async def _finish_page(self, job: DocumentJob, page: RenderedPage) -> PageResult:
        route = route_page(page, self.spec.text_layer)
        if route is not Route.ENGINE:
            return settled_page(page, route)
        result = await self.reader.read(page, PageKey(job.doc_id, page.page))
        return clean_page(result, self.prompts) if self.passes.clean else result

    def _meta(self, job: DocumentJob) -> DocumentMeta:
        created = _mtime(local_path(job.source.uri))
        name = job.rel if self.out.relative_source_names else None
        return DocumentMeta(
            job.rel, job.content_sha256, created, self.engine_name, self.fingerprint, name
        )


def _unreadable(source: Source) -> tuple[str, str] | None:
    refused = refusal(source.kind)  # refused when the inputs were expanded: never read
    if refused:
        return refused
    if source.kind == "empty" or source.size == 0:
        return Reason.EMPTY, "the file is empty (0 bytes)"
    if source.kind not in {"pdf", "image"}:
        return Reason.NOT_A_DOCUMENT, "not a PDF or an image (recognised by content)"
    return None


def _failed(job: DocumentJob, reason: str, message: str, page_count: int = 0) -> DocumentResult:
    return DocumentResult(
        job.doc_id, job.source.uri, DocStatus.FAILED, (), page_count, str(reason), message
    )


def _mtime(uri: str) -> float | None:
    try:
        return os.stat(uri).st_mtime
    except OSError:
        return None
