"""The Ray executor: the same worker loop in Ray actors across a cluster.

The driver plans the run's items in the workspace; each actor runs ``work()`` on that
workspace, claiming items by lease, so actors share the work without doing it twice. Ray
restarts a crashed actor (its items return after their leases expire, or at once on the
same host), and the workspace makes the whole run resumable across driver restarts.
Engines: ``embedded`` actors each use one CPU; ``vllm`` actors reserve a GPU and start a
managed vLLM on it; ``openai`` actors share the given servers over HTTP.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from typing import Any

from ocrflow.config import RunConfig
from ocrflow.errors import ConfigError
from ocrflow.executors.local import plan_run
from ocrflow.executors.worker import WorkerOptions, work
from ocrflow.runstats import RunStats
from ocrflow.sources import Source
from ocrflow.storage import open_store
from ocrflow.workitems import Manifest
from ocrflow.workspace import Workspace


class RayWorker:
    """One actor: a full ocrflow worker (render processes, engine, item loop)."""

    def __init__(self, config: RunConfig, options: WorkerOptions) -> None:
        self.config = config
        self.options = options

    def work(self) -> dict[str, Any]:
        """Work until no item is left; return this actor's tallies."""
        workspace = Workspace(open_store(self.config.output))
        stats = asyncio.run(work(self.config, workspace, options=self.options))
        return {
            "documents": dict(stats.documents),
            "pages": dict(stats.pages),
            "routes": dict(stats.routes),
            "failures": stats.failures,
            "tokens_in": stats.tokens_in,
            "tokens_out": stats.tokens_out,
        }


def run_ray(
    config: RunConfig,
    sources: list[Source] | None,
    options: WorkerOptions,
    *,
    address: str | None = None,
    actors: int = 2,
) -> RunStats:
    """Run ``config`` over a Ray cluster (started locally when ``address`` is ``None``)."""
    try:
        import ray
    except ImportError as exc:
        raise ConfigError("--executor ray needs Ray: pip install 'ocrflow[ray]'") from exc
    if sources is not None:
        workspace, _ = plan_run(config, sources)
    else:
        workspace = Workspace(open_store(config.output))
    before = Manifest(workspace.store).done_item_ids()
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(
            address=address,
            include_dashboard=False,
            log_to_driver=False,
            logging_level=logging.WARNING,
        )
    started = time.time()
    try:
        tallies = ray.get([a.work.remote() for a in _actors(ray, config, options, actors)])
    finally:
        if started_here:
            ray.shutdown()
    stats = _merge(tallies, earlier=_statuses(workspace, before))
    stats.started, stats.finished = started, time.time()
    return stats


def _actors(ray: Any, config: RunConfig, options: WorkerOptions, count: int) -> list[Any]:
    resources: dict[str, float] = {"num_cpus": max(1, config.render.workers // 2)}
    if config.engine.kind == "vllm":
        resources["num_gpus"] = 1
    remote_cls = ray.remote(max_restarts=3, max_task_retries=3, **resources)(RayWorker)
    # Each actor is an ordinary worker; only the driver reports earlier runs' documents.
    actor_options = WorkerOptions(
        lease_ttl_s=options.lease_ttl_s,
        shard_index=options.shard_index,
        num_shards=options.num_shards,
        split_pages=options.split_pages,
        report_finished_before=False,
    )
    return [remote_cls.remote(config, actor_options) for _ in range(count)]


def _statuses(workspace: Workspace, item_ids: set[str]) -> Counter[str]:
    """Document statuses of items finished before this run (split parents not counted)."""
    manifest = Manifest(workspace.store)
    found: Counter[str] = Counter()
    for item in manifest.items():
        record = manifest.item_done(item.item_id) if item.item_id in item_ids else None
        if record:
            doc = workspace.done_record(record.get("doc_id", "")) or {}
            found[doc.get("status", "pending")] += 1
    return found


def _merge(tallies: list[dict[str, Any]], *, earlier: Counter[str]) -> RunStats:
    stats = RunStats()
    for tally in tallies:
        stats.documents.update(Counter(tally["documents"]))
        stats.pages.update(Counter(tally["pages"]))
        stats.routes.update(Counter(tally["routes"]))
        stats.failures.extend(tally["failures"])
        stats.tokens_in += tally["tokens_in"]
        stats.tokens_out += tally["tokens_out"]
    stats.skipped_documents = sum(earlier.values())
    stats.documents.update(earlier)
    return stats
