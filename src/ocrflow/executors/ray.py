"""The Ray executor: the same worker loop in Ray actors across a cluster.

The driver plans the run's items in the workspace; each actor runs ``work()`` on that
workspace, claiming items by lease, so actors share the work without doing it twice. An
actor that dies (its process killed, its node lost) is replaced by a new one, a bounded
number of times; its items return at once on the same host (the lease names the actor's
pid, which no longer runs) or after their leases expire elsewhere. The driver reports each
lost actor, and then counts the run from the workspace's done markers, since a dead
actor's own tallies are gone. The workspace makes the whole run resumable across driver
restarts. Engines: ``embedded`` actors each use one CPU; ``vllm`` actors reserve a GPU and
start a managed vLLM on it; ``openai`` actors share the given servers over HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from collections.abc import Callable
from typing import Any

from ocrflow.config import RunConfig
from ocrflow.errors import require
from ocrflow.executors.item_loop import WorkerOptions
from ocrflow.executors.local import plan_run
from ocrflow.executors.worker import work
from ocrflow.inputs.source import Source
from ocrflow.observe.runstats import RunStats
from ocrflow.storage.open import open_store
from ocrflow.workspace.records import DoneRecord
from ocrflow.workspace.state import Workspace
from ocrflow.workspace.workitems import Manifest

log = logging.getLogger("ocrflow.ray")
#: How many dead actors may be replaced, per actor asked for.
REPLACEMENTS_PER_ACTOR = 3


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
            "skipped_documents": stats.skipped_documents,
            "pages": dict(stats.pages),
            "routes": dict(stats.routes),
            "failures": stats.failures,
            "tokens_in": stats.tokens_in,
            "tokens_out": stats.tokens_out,
            "leases_lost": stats.leases_lost,
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
    require("ray", extra="ray", feature="--executor ray")
    import ray

    if sources is not None:
        workspace, _ = plan_run(config, sources)
    else:
        workspace = Workspace(open_store(config.output))
    before = _done_doc_ids(workspace)
    started = time.time()
    # Ray's driver prints notices (a worker died, …) on stdout, where ``--json`` puts the
    # summary: send them to stderr with the rest of the log.
    with contextlib.redirect_stdout(sys.stderr):
        tallies, deaths = _on_cluster(ray, config, options, address, actors, workspace)
    if deaths:
        stats = _recount(workspace, before)
        stats.leases_lost = sum(t["leases_lost"] for t in tallies)
    else:
        stats = _merge(tallies, workspace, before)
    for message in deaths:
        stats.worker_lost("ray actor", message)
    _count_pending(stats, workspace)
    stats.started, stats.finished = started, time.time()
    return stats


def _on_cluster(
    ray: Any,
    config: RunConfig,
    options: WorkerOptions,
    address: str | None,
    actors: int,
    workspace: Workspace,
) -> tuple[list[dict[str, Any]], list[str]]:
    """Join (or start) the cluster and run the actors until the work is done."""
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(
            address=address,
            include_dashboard=False,
            log_to_driver=False,
            logging_level=logging.WARNING,
        )
    try:
        new_actor = _actor_factory(ray, config, options)
        return _work_on(ray, new_actor, actors, lambda: _work_left(workspace))
    finally:
        if started_here:
            ray.shutdown()


def _actor_factory(ray: Any, config: RunConfig, options: WorkerOptions) -> Callable[[], Any]:
    resources: dict[str, float] = {"num_cpus": max(1, config.render.workers // 2)}
    if config.engine.kind == "vllm":
        resources["num_gpus"] = 1
    # No restarts by Ray: the driver replaces a dead actor itself, so it knows and reports it.
    remote_cls = ray.remote(max_restarts=0, max_task_retries=0, **resources)(RayWorker)
    # Each actor is an ordinary worker; only the driver reports earlier runs' documents.
    actor_options = WorkerOptions(
        lease_ttl_s=options.lease_ttl_s,
        shard_index=options.shard_index,
        num_shards=options.num_shards,
        split_pages=options.split_pages,
        report_finished_before=False,
    )
    return lambda: remote_cls.remote(config, actor_options)


def _work_on(
    ray: Any, new_actor: Callable[[], Any], count: int, work_left: Callable[[], bool]
) -> tuple[list[dict[str, Any]], list[str]]:
    """Run ``count`` actors until they are done, replacing each that dies while work is left.

    Returns the tallies of the actors that finished and why each lost one died.
    """
    from ray.exceptions import RayActorError

    running = {actor.work.remote(): actor for actor in (new_actor() for _ in range(count))}
    tallies: list[dict[str, Any]] = []
    deaths: list[str] = []
    while running:
        ready, _ = ray.wait(list(running), num_returns=1)
        running.pop(ready[0])
        try:
            tallies.append(ray.get(ready[0]))
        except RayActorError as exc:
            deaths.append(_first_line(exc))
            log.warning("a Ray actor died (%s): %s", len(deaths), deaths[-1])
            if len(deaths) <= REPLACEMENTS_PER_ACTOR * count and work_left():
                actor = new_actor()
                running[actor.work.remote()] = actor
    return tallies, deaths


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return (lines[0] if lines else type(exc).__name__)[:300]


def _done_doc_ids(workspace: Workspace) -> set[str]:
    """Ids of the documents with a done marker (one listing, no reads)."""
    return workspace.done_ids()


def _work_left(workspace: Workspace) -> bool:
    return Manifest(workspace.store).unfinished() > 0


def _merge(tallies: list[dict[str, Any]], workspace: Workspace, before: set[str]) -> RunStats:
    """The actors' own tallies, plus the documents that earlier runs finished."""
    stats = RunStats()
    for tally in tallies:
        stats.documents.update(tally["documents"])
        stats.skipped_documents += tally["skipped_documents"]
        stats.pages.update(tally["pages"])
        stats.routes.update(tally["routes"])
        stats.failures.extend(tally["failures"])
        stats.tokens_in += tally["tokens_in"]
        stats.tokens_out += tally["tokens_out"]
        stats.leases_lost += tally["leases_lost"]
    for doc_id in sorted(before):
        record = workspace.done_record(doc_id) or DoneRecord(doc_id=doc_id, source="")
        stats.add_done_record(record, skipped=True)
    return stats


def _recount(workspace: Workspace, before: set[str]) -> RunStats:
    """The run's tallies from the done markers (what dead actors counted is lost with them,
    what they committed is not)."""
    stats = RunStats()
    for record in workspace.done_records():
        stats.add_done_record(record, skipped=record.doc_id in before)
    return stats


def _count_pending(stats: RunStats, workspace: Workspace) -> None:
    """Documents left without a done marker (every actor that could do them died)."""
    pending = len(Manifest(workspace.store).items()) - len(_done_doc_ids(workspace))
    if pending > 0:
        stats.documents["pending"] += pending
