"""The commands over an existing run's OUT: ``retry`` (re-queue and convert again),
``worker`` (join a run, or a job service's jobs), ``status`` and ``export``."""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError
from rich.console import Console

from ocrflow.cli.display import run_with_display, show_summary
from ocrflow.cli.exits import fail, output_failure
from ocrflow.config.flags import validation_message
from ocrflow.errors import EngineFailing, OcrflowError, OutputError, require
from ocrflow.executors.interrupts import stoppable
from ocrflow.executors.plan import Plan, rejoined, run_until_signal, worker_options
from ocrflow.inputs.expand import expand_inputs
from ocrflow.observe.logs import Quiet, Verbose, configure_logging, verbosity
from ocrflow.observe.report import print_status
from ocrflow.observe.status import collect_status
from ocrflow.storage.open import open_store
from ocrflow.workspace.state import Workspace
from ocrflow.workspace.workitems import Manifest


@stoppable
def retry_command(
    output: Annotated[str, typer.Argument(help="The output directory or URL of a run.")],
    failed: Annotated[bool, typer.Option(help="Re-queue failed documents.")] = True,
    partial: Annotated[bool, typer.Option(help="Re-queue partial documents.")] = True,
    reason: Annotated[
        list[str] | None, typer.Option(help="Only these reasons (repeatable).")
    ] = None,
    password: Annotated[
        list[str] | None, typer.Option(help="Password to try (repeatable).")
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option(
            help="API key (else OCRFLOW_API_KEY, else OPENAI_API_KEY).", show_default=False
        ),
    ] = None,
    lease_ttl: Annotated[
        float | None, typer.Option(help="Seconds a lease lasts unrenewed (default: the run's).")
    ] = None,
    max_image_pixels: Annotated[
        int | None, typer.Option(help="Raise the run's source image limit (too_large).")
    ] = None,
    max_pixels: Annotated[
        int | None, typer.Option(help="Raise the run's rendered page limit (too_large).")
    ] = None,
    render_memory: Annotated[
        int | None, typer.Option(help="Raise the run's render process memory, MiB.")
    ] = None,
    run_now: Annotated[
        bool, typer.Option("--run/--no-run", help="Convert them right away.")
    ] = True,
    verbose: Verbose = False,
    quiet: Quiet = False,
) -> None:
    """Re-queue partial and failed documents of a run, then convert them again."""
    configure_logging(verbosity(verbose, quiet))
    statuses = {name for name, wanted in (("failed", failed), ("partial", partial)) if wanted}
    try:
        workspace = Workspace(open_store(output))
        config = workspace.recorded_run_config()
        requeued = workspace.requeue(statuses, set(reason) if reason else None)
        Manifest(workspace.store).clear_documents(requeued)
        Console(stderr=True).print(f"re-queued {len(requeued)} documents")
        if not run_now or not requeued:
            raise typer.Exit(0)
        limits = {"max_image_pixels": max_image_pixels, "max_pixels": max_pixels,
                  "worker_memory_mb": render_memory}  # fmt: skip
        config = rejoined(
            config, output, passwords=password or (), api_key=api_key, lease_ttl=lease_ttl,
            render={k: v for k, v in limits.items() if v is not None},
        )  # fmt: skip
        sources = expand_inputs(config.inputs, exclude=[config.output], options=config.input)
        plan = Plan(config, sources, worker_options(config.scale))
        stats = run_with_display(plan, quiet=quiet)
    except (OutputError, EngineFailing, ExceptionGroup) as exc:
        raise output_failure(exc) from None
    except OcrflowError as exc:
        raise fail(str(exc)) from None
    except ValidationError as exc:
        raise fail(validation_message(exc)) from None
    show_summary(stats, output, quiet=quiet)
    raise typer.Exit(stats.exit_code())


@stoppable
def worker_command(
    output: Annotated[
        str | None, typer.Argument(help="The output directory or URL of a run to join.")
    ] = None,
    root: Annotated[
        Path | None, typer.Option(help="Instead: work on the jobs of an `ocrflow serve` ROOT.")
    ] = None,
    slots: Annotated[int, typer.Option(help="With --root: jobs worked on at once.")] = 1,
    exit_when_idle: Annotated[
        bool, typer.Option(help="With --root: exit when no job has work left.")
    ] = False,
    password: Annotated[
        list[str] | None, typer.Option(help="Password to try (repeatable).")
    ] = None,
    lease_ttl: Annotated[
        float | None, typer.Option(help="Seconds a lease lasts unrenewed (default: the run's).")
    ] = None,
    shard_index: Annotated[int | None, typer.Option(help="This worker's static shard.")] = None,
    num_shards: Annotated[int | None, typer.Option(help="Number of static shards.")] = None,
    server: Annotated[list[str] | None, typer.Option(help="Override the run's servers.")] = None,
    api_key: Annotated[
        str | None,
        typer.Option(
            help="API key (else OCRFLOW_API_KEY, else OPENAI_API_KEY).", show_default=False
        ),
    ] = None,
    workers: Annotated[int | None, typer.Option(min=1, help="Render processes.")] = None,
    progress_interval: Annotated[
        float,
        typer.Option(
            min=0, help="Seconds between progress lines when stderr is not a terminal (0: none)."
        ),
    ] = 10.0,
    verbose: Verbose = False,
    quiet: Quiet = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON summary.")] = False,
) -> None:
    """Join an existing run: take work items from OUT until none is left (or, with --root,
    work on the queued jobs of an `ocrflow serve` root, fair share across jobs)."""
    configure_logging(verbosity(verbose, quiet))
    if (output is None) == (root is None):
        raise fail("give OUT (a run to join) or --root ROOT (a job service's jobs)")
    if root is not None:
        from ocrflow.service.command import work_root

        if not (root / "jobs").is_dir():  # else it would wait for jobs that never come
            raise fail(f"--root {root} is not an ocrflow serve root (it has no jobs/ folder)")

        job = work_root(root, slots, api_key, server or (), workers, lease_ttl, exit_when_idle)
        with contextlib.suppress(KeyboardInterrupt, asyncio.CancelledError):
            run_until_signal(job)
        raise typer.Exit(0)
    assert output is not None  # OUT or --root: checked above
    try:
        config = rejoined(
            Workspace(open_store(output)).recorded_run_config(),
            output,
            passwords=password or (),
            api_key=api_key,
            servers=server or (),
            workers=workers,
            lease_ttl=lease_ttl,
        )
        options = worker_options(config.scale, shard_index, num_shards)
        plan = Plan(config, None, options, progress_interval_s=progress_interval)
        stats = run_with_display(plan, quiet=quiet or as_json)
    except (OutputError, EngineFailing, ExceptionGroup) as exc:
        raise output_failure(exc) from None
    except OcrflowError as exc:
        raise fail(str(exc)) from None
    show_summary(stats, output, quiet=quiet, as_json=as_json)
    raise typer.Exit(stats.exit_code())


def status_command(
    output: Annotated[str, typer.Argument(help="An output directory or URL of a run.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    gpu_hour_cost: Annotated[
        float | None, typer.Option(help="Price of a GPU hour, for cost per 1,000 pages.")
    ] = None,
    verbose: Verbose = False,
    quiet: Quiet = False,
) -> None:
    """Show documents and pages by state, failures by reason, and speed."""
    configure_logging(verbosity(verbose, quiet))
    try:
        workspace = Workspace(open_store(output))
        if not workspace.recorded_config():
            raise fail(f"{output} holds no ocrflow run")
        report = collect_status(workspace, gpu_hour_cost=gpu_hour_cost)
    except OutputError as exc:
        raise output_failure(exc) from None
    except OcrflowError as exc:
        raise fail(str(exc)) from None
    if as_json:
        typer.echo(json.dumps(report))
        return
    print_status(report)


def export_command(
    output: Annotated[str, typer.Argument(help="The output directory or URL of a run.")],
    dest: Annotated[str, typer.Argument(help="Folder or URL to write the dataset to.")],
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            help="parquet: Parquet shards; hf: a folder datasets.load_from_disk opens"
            " (needs ocrflow[hf]).",
        ),
    ] = "parquet",
    overwrite: Annotated[
        bool,
        typer.Option(help="Export into a folder holding files export did not write."),
    ] = False,
    verbose: Verbose = False,
    quiet: Quiet = False,
) -> None:
    """Convert the finished documents of OUT into Parquet shards or a Hugging Face dataset.
    Exporting again into the same folder replaces the earlier export."""
    configure_logging(verbosity(verbose, quiet))
    if fmt not in {"parquet", "hf"}:
        raise fail(f"unknown export format {fmt!r}: use parquet or hf")
    try:
        require("pyarrow", extra="parquet", feature=f"ocrflow export --format {fmt}")
        from ocrflow.stages.export import export as export_out

        report = export_out(output, fmt, dest, overwrite=overwrite)  # type: ignore[arg-type]
    except OutputError as exc:
        raise output_failure(exc) from None
    except OcrflowError as exc:
        raise fail(str(exc)) from None
    typer.echo(f"exported {report.rows} documents to {dest} ({len(report.files)} files)")
