"""What a command asked for (a ``Plan``) and how it runs: on which executor, with which
progress display, stopped cleanly by Ctrl-C or SIGTERM."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import SecretStr
from rich.console import Console

from ocrflow.config import RenderOptions, RunConfig, ScaleOptions
from ocrflow.errors import ConfigError
from ocrflow.executors.interrupts import active_interrupts
from ocrflow.executors.local import run_local
from ocrflow.executors.worker import WorkerOptions, work
from ocrflow.metrics import Metrics
from ocrflow.progress import BarProgress, LogProgress
from ocrflow.runstats import RunStats
from ocrflow.skips import Skipped
from ocrflow.storage import open_store
from ocrflow.workitems import Manifest
from ocrflow.workspace import Workspace


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


def worker_options(
    scale: ScaleOptions, shard_index: int | None = None, num_shards: int | None = None
) -> WorkerOptions:
    if (shard_index is None) != (num_shards is None):
        raise ConfigError("--shard-index and --num-shards go together")
    if num_shards is not None and not 0 <= (shard_index or 0) < num_shards:
        raise ConfigError("--shard-index must be in 0 .. --num-shards - 1")
    return WorkerOptions(
        lease_ttl_s=scale.lease_ttl_s,
        shard_index=shard_index,
        num_shards=num_shards,
        split_pages=scale.split_pages,
    )


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
    (``render``: render limits raised for ``ocrflow retry``)."""
    engine: dict[str, Any] = {"servers": tuple(servers)} if servers else {}
    if api_key:
        engine["api_key"] = SecretStr(api_key)
    render = {**(render or {}), **({"workers": workers} if workers else {})}
    scale = {"lease_ttl_s": lease_ttl} if lease_ttl is not None else {}
    return config.model_copy(
        update={
            "passwords": tuple(SecretStr(p) for p in passwords),
            "engine": config.engine.model_copy(update=engine),
            "render": RenderOptions.model_validate(config.render.model_dump() | render),
            "scale": ScaleOptions.model_validate(config.scale.model_dump() | scale),
            "output": output,
        }
    )


def execute_plan(plan: Plan, *, quiet: bool) -> RunStats:
    """Run the plan on its executor, with a progress bar on a terminal, log lines
    otherwise, nothing when ``quiet``. Ctrl-C and SIGTERM raise ``KeyboardInterrupt`` /
    ``CancelledError`` once every child is stopped."""
    console = Console(stderr=True)
    if plan.executor not in {"local", "ray"}:
        raise ConfigError(f"unknown executor {plan.executor!r}: use local or ray")
    total = len(plan.sources) if plan.sources is not None else _planned(plan.config)
    if plan.executor == "ray":
        from ocrflow.executors.ray import run_ray

        if plan.metrics is not None:
            raise ConfigError("--metrics-port works with --executor local only")

        return run_ray(
            plan.config,
            plan.sources,
            plan.worker,
            address=plan.ray_address,
            actors=plan.ray_workers,
        )
    if quiet:
        return run_until_signal(_execute(plan, None))
    if console.is_terminal:
        with BarProgress(total, console) as bar:
            return run_until_signal(_execute(plan, bar))
    with LogProgress(total, interval_s=plan.progress_interval_s) as log_lines:
        return run_until_signal(_execute(plan, log_lines))


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


def _planned(config: RunConfig) -> int:
    return len(Manifest(open_store(config.output)).items())


def run_until_signal(work: Coroutine[Any, Any, RunStats]) -> RunStats:
    """Run ``work``; SIGTERM cancels it like Ctrl-C does, so every child is stopped. Under
    ``Interrupts`` (``ocrflow run``, ``worker``, ``retry``), a signal cancels it and the
    process ends at once if it has not stopped within a few seconds."""

    async def main() -> RunStats:
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
