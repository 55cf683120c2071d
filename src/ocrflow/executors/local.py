"""``ocrflow run``: plan the run's work items in the workspace, then work on them here."""

from __future__ import annotations

from collections.abc import Iterator

from ocrflow.config import RunConfig
from ocrflow.executors.worker import WorkerOptions, work
from ocrflow.pipeline import Progress
from ocrflow.runstats import RunStats
from ocrflow.sinks import safe_relpath
from ocrflow.sources import Source, expand_inputs
from ocrflow.storage import open_store
from ocrflow.workitems import Manifest, document_items
from ocrflow.workspace import Workspace


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


def plan_run(config: RunConfig, sources: list[Source] | None = None) -> tuple[Workspace, int]:
    """Bind the workspace to ``config`` and add the inputs' items to its manifest.

    Returns the workspace and the number of document items the inputs name.
    """
    workspace = Workspace(open_store(config.output))
    fingerprint = workspace.bind(config)
    if sources is None:
        sources = expand_inputs(config.inputs, exclude=[config.output])
    items = document_items(plan_jobs(sources), fingerprint)
    Manifest(workspace.store).extend(items)
    return workspace, len(items)


async def run_local(
    config: RunConfig,
    *,
    sources: list[Source] | None = None,
    progress: Progress | None = None,
    worker: WorkerOptions | None = None,
) -> RunStats:
    """Convert every input of ``config`` into ``config.output``; resumable, and safe to run
    beside other workers on the same output."""
    workspace, _ = plan_run(config, sources)
    return await work(config, workspace, options=worker, progress=progress)
