"""``ocrflow run``: plan the run's work items in the workspace, then work on them here."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from ocrflow.config import RunConfig
from ocrflow.errors import ConfigError
from ocrflow.executors.input_changes import refresh_changed
from ocrflow.executors.item_loop import WorkerOptions
from ocrflow.executors.worker import work
from ocrflow.inputs.expand import expand_inputs
from ocrflow.inputs.skips import Skipped, save_skipped
from ocrflow.inputs.source import Source
from ocrflow.observe.metrics import Metrics
from ocrflow.observe.runstats import RunStats
from ocrflow.pipeline.documents import Progress
from ocrflow.storage.names import unique_names
from ocrflow.storage.open import open_store
from ocrflow.workspace.state import Workspace, store_call
from ocrflow.workspace.workitems import Manifest, document_items


def plan_jobs(
    sources: list[Source], known: Mapping[str, str] | None = None
) -> Iterator[tuple[Source, str]]:
    """Pair each source with a unique, safe relative name (inputs may share names, or differ
    only in case or Unicode normalisation); ``known``: names earlier runs gave, by URI."""
    return unique_names(sources, known)


class TooManyDocuments(ConfigError):
    """The inputs name more documents than the caller allows (nothing was planned)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the inputs name more than {limit} documents")
        self.limit = limit


def plan_run(
    config: RunConfig,
    sources: list[Source] | None = None,
    *,
    max_documents: int | None = None,
    skipped: Skipped | None = None,
) -> tuple[Workspace, int]:
    """Bind the workspace to ``config`` and add the inputs' items to its manifest.

    Returns the workspace and the number of document items the inputs name. Sources an
    earlier run planned keep their names, and new names avoid theirs. ``max_documents``:
    ``TooManyDocuments`` when the inputs name more; expanding stops right past the cap and
    nothing is written (a dataset of a million rows is not read to the end). What the
    inputs' walks left out (``skipped``, counted here when the sources are expanded here)
    is recorded for ``ocrflow status``.
    """
    if sources is None:
        limit = max_documents + 1 if max_documents else None
        skipped = skipped if skipped is not None else Skipped()
        sources = expand_inputs(
            config.inputs,
            exclude=[config.output],
            options=config.input,
            limit=limit,
            skipped=skipped,
        )
    if max_documents and len(sources) > max_documents:
        raise TooManyDocuments(max_documents)
    workspace = Workspace(open_store(config.output))
    fingerprint = workspace.bind(config)
    if skipped is not None:
        save_skipped(workspace.store, skipped)
    manifest = Manifest(workspace.store)
    recorded = manifest.items()
    known = {item.uri: item.rel for item in recorded}
    items = document_items(plan_jobs(sources, known), fingerprint)
    manifest.extend(items)
    refresh_changed(workspace, items, fingerprint, recorded)  # changed sources: redone
    return workspace, len(items)


async def run_local(
    config: RunConfig,
    *,
    sources: list[Source] | None = None,
    progress: Progress | None = None,
    worker: WorkerOptions | None = None,
    metrics: Metrics | None = None,
    skipped: Skipped | None = None,
) -> RunStats:
    """Convert every input of ``config`` into ``config.output``; resumable, and safe to run
    beside other workers on the same output. ``skipped``: what expanding ``sources`` left
    out, recorded and reported with the run's figures."""
    skipped = skipped if skipped is not None else Skipped()
    workspace, _ = plan_run(config, sources, skipped=skipped)
    stats = await work(config, workspace, options=worker, progress=progress, metrics=metrics)
    stats.files_skipped = skipped
    if "parquet" in config.out.formats:
        # Dataset inputs: the input rows again, with their Markdown. Imported here, as
        # pyarrow is the parquet extra's.
        from ocrflow.sinks.dataset_writeback import write_back_datasets

        await store_call(write_back_datasets, config, workspace)
    return stats
