"""What a command asked for (a ``Plan``) and how it runs: on which executor, with which
progress display, stopped cleanly by Ctrl-C or SIGTERM."""

from __future__ import annotations

import asyncio
import functools
import signal
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from rich.console import Console

from ocrflow.config import RunConfig, ScaleOptions
from ocrflow.config.builder import build_run_config, option_for
from ocrflow.errors import ConfigError
from ocrflow.executors.interrupts import active_interrupts
from ocrflow.executors.item_loop import WorkerOptions
from ocrflow.executors.local import run_local
from ocrflow.executors.shards import Shard, shard_from_flags, shard_part
from ocrflow.executors.worker import work
from ocrflow.inputs.skips import Skipped
from ocrflow.observe.metrics import Metrics
from ocrflow.observe.progress import BarProgress, LogProgress
from ocrflow.observe.runstats import RunStats
from ocrflow.storage.open import open_store
from ocrflow.workspace.state import Workspace
from ocrflow.workspace.workitems import Manifest

_Result = TypeVar("_Result")


@dataclass(frozen=True)
class Plan:
    """What a run command asked for: the config, its inputs, and how to execute it."""

    config: RunConfig
    sources: list[Any] | None
    worker: WorkerOptions
    executor: str = "local"
    ray_address: str | None = None
    ray_workers: int = 2
    #: Prometheus metrics the run reports to (``--metrics-port``); local executor only.
    metrics: Metrics | None = None
    #: Seconds between progress lines when stderr is not a terminal (0: none).
    progress_interval_s: float = 10.0
    #: What expanding ``sources`` left out (recorded and reported with the run).
    skipped: Skipped | None = None

    @functools.cached_property
    def documents(self) -> int:
        """The documents the run works on: the inputs (its shard's part when sharded), or,
        joining a planned run, the items planned in OUT (its shard's)."""
        shard = plan_shard(self)
        if self.sources is None:
            return _planned(self.config, shard)
        if shard is None:
            return len(self.sources)
        return shard_part(self.config, self.sources, shard)


def worker_options(
    scale: ScaleOptions,
    shard_index: int | None = None,
    num_shards: int | None = None,
    *,
    shard: Shard | None = None,
) -> WorkerOptions:
    """How this process works on the run: ``scale``'s leases and splits, and its static
    shard (``shard``, else ``--shard-index/--num-shards``; ``executors.shards``)."""
    shard = shard or shard_from_flags(shard_index, num_shards)
    return WorkerOptions(
        lease_ttl_s=scale.lease_ttl_s,
        shard_index=shard.index if shard else None,
        num_shards=shard.count if shard else None,
        split_pages=scale.split_pages,
    )


def plan_shard(plan: Plan) -> Shard | None:
    """The static shard the plan's worker takes, if any."""
    options = plan.worker
    if options.num_shards is None:
        return None
    return Shard(options.shard_index or 0, options.num_shards)


def shard_note(plan: Plan) -> str | None:
    """What a sharded run covers, for its summary; ``None`` for a run of every item."""
    shard = plan_shard(plan)
    if shard is None:
        return None
    whole = len(plan.sources) if plan.sources is not None else _planned(plan.config, None)
    others = {1: "the other shard takes"}.get(
        shard.count - 1, f"the other {shard.count - 1} shards take"
    )
    rest = f"; {others} the rest (pending in this OUT unless written to it too)"
    rest = rest if shard.count > 1 else ""
    return f"shard {shard}: this run's part is {plan.documents} of {whole} documents{rest}"


def rejoined(
    config: RunConfig,
    output: str,
    *,
    passwords: Sequence[str],
    api_key: str | None,
    servers: Sequence[str] = (),
    workers: int | None = None,
    lease_ttl: float | None = None,
    render: dict[str, Any] | None = None,
) -> RunConfig:
    """The recorded config of a run, with what this command was given: secrets (never
    recorded), the output as this process reaches it, and per-process overrides
    (``render``: render limits raised for ``ocrflow retry``, by field name). What is not
    given (``None``, empty, 0 workers) keeps the recorded value."""
    limits = {option_for("render", name): value for name, value in (render or {}).items()}
    return build_run_config(
        config.inputs,
        output,
        base=config,
        password=list(passwords),
        api_key=api_key or None,
        server=servers or None,
        workers=workers or None,
        lease_ttl=lease_ttl,
        **limits,
    )


def execute_plan(plan: Plan, *, quiet: bool) -> RunStats:
    """Run the plan on its executor (``EXECUTORS``). Ctrl-C and SIGTERM raise
    ``KeyboardInterrupt`` / ``CancelledError`` once every child is stopped."""
    execute = EXECUTORS.get(plan.executor)
    if execute is None:
        known = " or ".join(EXECUTORS)
        raise ConfigError(f"unknown executor {plan.executor!r}: use {known}")
    return execute(plan, quiet)


def _execute_local(plan: Plan, quiet: bool) -> RunStats:
    """In this process, with a progress bar on a terminal, log lines otherwise, nothing
    when ``quiet``."""
    console = Console(stderr=True)
    total = plan.documents
    if quiet:
        return run_until_signal(_execute(plan, None))
    if console.is_terminal:
        with BarProgress(total, console) as bar:
            return run_until_signal(_execute(plan, bar))
    with LogProgress(total, interval_s=plan.progress_interval_s) as log_lines:
        return run_until_signal(_execute(plan, log_lines))


def _execute_ray(plan: Plan, quiet: bool) -> RunStats:
    """On a Ray cluster's actors; Ray is imported only here (the ``ray`` extra)."""
    from ocrflow.executors.ray import run_ray

    if plan.metrics is not None:
        raise ConfigError("--metrics-port works with --executor local only")
    return run_ray(
        plan.config, plan.sources, plan.worker, address=plan.ray_address, actors=plan.ray_workers
    )


#: ``--executor`` name -> how it runs a plan. Adding an executor: a module in
#: ``executors/`` that drives the item loop (``executors.item_loop``) and one line here.
EXECUTORS: dict[str, Callable[[Plan, bool], RunStats]] = {
    "local": _execute_local,
    "ray": _execute_ray,
}


async def _execute(plan: Plan, progress: Any) -> RunStats:
    if plan.sources is not None:
        return await run_local(
            plan.config,
            sources=plan.sources,
            progress=progress,
            worker=plan.worker,
            metrics=plan.metrics,
            skipped=plan.skipped,
        )
    workspace = Workspace(open_store(plan.config.output))
    return await work(
        plan.config, workspace, options=plan.worker, progress=progress, metrics=plan.metrics
    )


def _planned(config: RunConfig, shard: Shard | None) -> int:
    items = Manifest(open_store(config.output)).items()
    return sum(1 for item in items if shard is None or shard.holds(item))


def run_until_signal(work: Coroutine[Any, Any, _Result]) -> _Result:
    """Run ``work``; SIGTERM cancels it like Ctrl-C does, so every child is stopped. Under
    ``Interrupts`` (``ocrflow run``, ``worker``, ``retry``), a signal cancels it and the
    process ends at once if it has not stopped within a few seconds."""

    async def main() -> _Result:
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        interrupts = active_interrupts()
        if interrupts is None:
            loop.add_signal_handler(signal.SIGTERM, task.cancel)
            return await work
        with interrupts.cancelling(loop, task):
            return await work

    return asyncio.run(main())
