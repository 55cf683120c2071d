"""The local executor: one asyncio loop, a pool of render processes, one engine."""

from __future__ import annotations

import asyncio
import os
import socket
import time
import uuid
from collections.abc import Iterator

from ocrflow.config import EngineOptions, RunConfig
from ocrflow.engines.factory import build_engine
from ocrflow.engines.session import EngineSession, open_engine
from ocrflow.pipeline import (
    CHUNK_PAGES,
    DocumentJob,
    DocumentPipeline,
    PageBudget,
    Progress,
    content_hash,
    document_id,
)
from ocrflow.reader import PageReader, PlainReader
from ocrflow.render.pool import RenderPool
from ocrflow.runstats import RunStats
from ocrflow.sinks import DocumentSink, safe_relpath
from ocrflow.sources import Source, expand_inputs
from ocrflow.storage import open_store
from ocrflow.workspace import Workspace


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


def plan_jobs(sources: list[Source]) -> Iterator[tuple[Source, str]]:
    """Pair each source with a unique, safe relative name (inputs may share names)."""
    seen: set[str] = set()
    for source in sources:
        rel = safe_relpath(source.rel)
        candidate, n = rel, 1
        while candidate.lower() in seen:
            n += 1
            candidate = f"{rel}~{n}"
        seen.add(candidate.lower())
        yield source, candidate


def build_reader(config: RunConfig, session: EngineSession, workspace: Workspace) -> PageReader:
    """The page reader for the engine: plain text, or a recipe with retries and fallbacks."""
    if session.recipe is None:
        return PlainReader(session.engine)
    from ocrflow.policy import AttemptPolicy, TransportPolicy
    from ocrflow.vlm_reader import VlmReader

    options = config.engine
    return VlmReader(
        session.engine,
        session.recipe,  # type: ignore[arg-type]
        store=workspace.store,
        transport=TransportPolicy(
            page_deadline_s=options.page_deadline_s, request_timeout_s=options.request_timeout_s
        ),
        attempts=AttemptPolicy(max_page_error_rate=options.max_page_error_rate),
        fallback_engine=lambda: build_engine(EngineOptions(kind="embedded")),
    )


def page_budget(config: RunConfig) -> int:
    """How many pages may be rendered and not yet read: enough to keep the engine busy."""
    render_ahead = CHUNK_PAGES * config.render.workers * 2
    if config.engine.kind in {"embedded", "tesseract"}:
        return max(render_ahead, 32)
    replicas = max(1, len(config.engine.servers), len(config.engine.gpus))
    concurrency = config.engine.max_concurrency or 256
    return render_ahead + concurrency * replicas + CHUNK_PAGES * 4


async def run_local(
    config: RunConfig, *, sources: list[Source] | None = None, progress: Progress | None = None
) -> RunStats:
    """Convert every input of ``config`` (or the given ``sources``) into ``config.output``.

    Resumable: documents finished by an earlier run are skipped, and interrupted documents
    restart from their last page checkpoint.
    """
    stats = RunStats()
    listeners = FanOut(stats, progress) if progress else stats
    workspace = Workspace(open_store(config.output))
    fingerprint = workspace.bind(config)
    if sources is None:
        sources = expand_inputs(config.inputs, exclude=[config.output])
    run_id = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:6]}"
    pool = RenderPool(
        config.render.workers,
        page_timeout_s=config.render.page_timeout_s,
        memory_mb=config.render.worker_memory_mb,
    )
    try:
        async with open_engine(config.engine, log_dir=workspace.log_dir()) as session:
            reader = build_reader(config, session, workspace)
            pipeline = DocumentPipeline(
                config,
                pool=pool,
                reader=reader,
                workspace=workspace,
                sink=DocumentSink(workspace.store, page_separator=config.out.page_separator),
                budget=PageBudget(page_budget(config)),
                progress=listeners,  # type: ignore[arg-type]
                fingerprint=fingerprint,
                engine_name=session.label,
                target_dim=config.render.target_dim or session.target_dim,
            )
            try:
                await _convert_all(pipeline, sources, fingerprint, config)
            finally:
                await reader.aclose()
    finally:
        stats.finished = time.time()
        pool.close()
        record = stats.record(run_id, f"{socket.gethostname()}:{os.getpid()}")
        workspace.record_run(run_id, {**record, "documents_total": len(sources)})
    return stats


async def _convert_all(
    pipeline: DocumentPipeline, sources: list[Source], fingerprint: str, config: RunConfig
) -> None:
    # Enough documents open at once to fill the page budget with small documents.
    slots = asyncio.Semaphore(max(4, config.render.workers * 2, page_budget(config) // CHUNK_PAGES))

    async def one(source: Source, rel: str) -> None:
        try:
            digest = await asyncio.to_thread(_hash_or_empty, source.uri)
            job = DocumentJob(source, rel, document_id(digest, fingerprint, rel), digest)
            await pipeline.convert(job)
        finally:
            slots.release()

    async with asyncio.TaskGroup() as group:
        for source, rel in plan_jobs(sources):
            await slots.acquire()
            group.create_task(one(source, rel))


def _hash_or_empty(path: str) -> str:
    try:
        return content_hash(path)
    except OSError:
        return "unreadable"
