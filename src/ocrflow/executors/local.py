"""``ocrflow run``: plan the run's work items in the workspace, then work on them here."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from ocrflow.config import RunConfig
from ocrflow.dataset_writeback import write_back_datasets
from ocrflow.executors.worker import WorkerOptions, work
from ocrflow.metrics import Metrics
from ocrflow.names import unique_names
from ocrflow.pipeline import Progress
from ocrflow.runstats import RunStats
from ocrflow.sources import Source, expand_inputs
from ocrflow.storage import open_store
from ocrflow.workitems import Manifest, document_items
from ocrflow.workspace import Workspace, store_call


def plan_jobs(
    sources: list[Source], known: Mapping[str, str] | None = None
) -> Iterator[tuple[Source, str]]:
    """Pair each source with a unique, safe relative name (inputs may share names, or differ
    only in case or Unicode normalisation); ``known``: names earlier runs gave, by URI."""
    return unique_names(sources, known)


def plan_run(config: RunConfig, sources: list[Source] | None = None) -> tuple[Workspace, int]:
    """Bind the workspace to ``config`` and add the inputs' items to its manifest.

    Returns the workspace and the number of document items the inputs name. Sources an
    earlier run planned keep their names, and new names avoid theirs.
    """
    workspace = Workspace(open_store(config.output))
    fingerprint = workspace.bind(config)
    if sources is None:
        sources = expand_inputs(config.inputs, exclude=[config.output], options=config.input)
    manifest = Manifest(workspace.store)
    known = {item.uri: item.rel for item in manifest.items()}
    items = document_items(plan_jobs(sources, known), fingerprint)
    manifest.extend(items)
    return workspace, len(items)


async def run_local(
    config: RunConfig,
    *,
    sources: list[Source] | None = None,
    progress: Progress | None = None,
    worker: WorkerOptions | None = None,
    metrics: Metrics | None = None,
) -> RunStats:
    """Convert every input of ``config`` into ``config.output``; resumable, and safe to run
    beside other workers on the same output."""
    workspace, _ = plan_run(config, sources)
    stats = await work(config, workspace, options=worker, progress=progress, metrics=metrics)
    # Dataset inputs with ``--format parquet``: the input rows again, with their Markdown.
    await store_call(write_back_datasets, config, workspace)
    return stats
