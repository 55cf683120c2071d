"""The ``ocrflow`` command. Each command builds a config and calls one function."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import shlex
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape

from ocrflow.api import build_run_config
from ocrflow.config import EngineOptions
from ocrflow.errors import EngineFailing, OcrflowError, OutputError, first_error
from ocrflow.evaluation.command import eval_command
from ocrflow.executors.interrupts import RESUME_HINT, interrupted_exit_code, stoppable
from ocrflow.executors.plan import (
    Plan,
    execute_plan,
    rejoined,
    run_until_signal,
    worker_options,
)
from ocrflow.flags import validation_message
from ocrflow.metrics import serve_metrics
from ocrflow.names import shown
from ocrflow.preflight import check_before_start
from ocrflow.remote import backend_errors, backend_message
from ocrflow.report import print_run_summary, print_status
from ocrflow.review.command import review_command
from ocrflow.runstats import RunStats
from ocrflow.service.command import serve_command
from ocrflow.skips import Skipped
from ocrflow.sources import expand_inputs
from ocrflow.stages.commands import (
    assemble_command,
    describe_command,
    run_later_stages,
)
from ocrflow.status import collect_status, out_summary
from ocrflow.storage import open_store
from ocrflow.workitems import Manifest
from ocrflow.workspace import Workspace

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="ocrflow: PDFs, scans and photos to Markdown and JSONL, with VLMs or a CPU engine.",
)
USAGE_ERROR = 2
OUTPUT_ERROR = 3
ENGINE_FAILING = 4
NOTHING_TO_CONVERT = 5
VLM = "VLM engines (--engine openai / vllm)"
SCALE = "Scale-out (many workers, Ray)"


def _fail(message: str) -> typer.Exit:
    # One unwrapped line: scripts grep it, and a path must not be cut in two.
    Console(stderr=True).print(
        f"[red]error:[/] {escape(shown(message))}", highlight=False, soft_wrap=True
    )
    return typer.Exit(USAGE_ERROR)


def _output_failure(exc: Exception) -> typer.Exit:
    """Exit 3 with one line naming the OUT path that could not be written (disk full,
    read-only, no permission): no traceback, finished documents stay, the next run resumes.
    ``exc`` may be a task group's errors: one of ours without an output error exits 2."""
    failing = first_error(exc, EngineFailing)
    if failing is not None:
        return _engine_failure(failing)
    error = first_error(exc, OutputError)
    if error is None:
        ours = first_error(exc, OcrflowError)
        if ours is None:
            raise exc  # a bug: keep its traceback
        return _fail(str(ours))
    # Plain echo, not rich: rich would wrap a long path onto several lines.
    typer.echo(f"error: {error}", err=True)
    return typer.Exit(OUTPUT_ERROR)


def _engine_failure(error: EngineFailing) -> typer.Exit:
    """Exit 4 with the servers and their causes: every server failed for ``--fail-after``;
    unfinished pages stay pending for the next run."""
    typer.echo(f"error: {error}", err=True)
    return typer.Exit(ENGINE_FAILING)


def _configure_logging(quiet: bool) -> None:
    # Names that are not UTF-8 are shown escaped (``names.shown``); should one slip through
    # to a print or a log line, it is written as ``\udce9``, never a UnicodeEncodeError.
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    logging.basicConfig(
        level=logging.WARNING if quiet else logging.INFO,
        format="%(asctime)s %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    # httpx logs every request at INFO: far too much for a run of a million pages; botocore
    # says where it found credentials on every start.
    for noisy in ("httpx", "botocore", "aiobotocore"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


@app.command()
@stoppable
def run(
    inputs: Annotated[
        list[str], typer.Argument(help="Files, directories, globs, @list.txt, URLs.")
    ],
    output: Annotated[str, typer.Option("-o", "--output", help="Output directory or URL.")],
    pages: Annotated[str | None, typer.Option(help="Pages to convert, e.g. 1-5,9,20-end.")] = None,
    text_layer: Annotated[
        str, typer.Option(help="auto: use good native text; off: always OCR; only: never OCR.")
    ] = "auto",
    engine: Annotated[
        str,
        typer.Option(
            help="embedded (CPU, default), tesseract, openai (a server), vllm (we start it)."
        ),
    ] = "embedded",
    target_dim: Annotated[
        int | None, typer.Option(help="Longest side of rendered pages, px (default: the engine's).")
    ] = None,
    page_separator: Annotated[bool, typer.Option(help="Mark pages in the Markdown.")] = False,
    output_format: Annotated[
        str,
        typer.Option("--format", help="Output formats, comma-separated: markdown, jsonl, parquet."),
    ] = "markdown,jsonl",
    dataset_column: Annotated[
        str | None, typer.Option(help="Dataset inputs: the column holding images or PDFs.")
    ] = None,
    dataset_id_column: Annotated[
        str | None, typer.Option(help="Dataset inputs: the column holding each row's id.")
    ] = None,
    password: Annotated[
        list[str] | None, typer.Option(help="Password to try (repeatable).")
    ] = None,
    passwords: Annotated[Path | None, typer.Option(help="File of passwords, one a line.")] = None,
    workers: Annotated[int | None, typer.Option(min=1, help="Render processes.")] = None,
    page_timeout: Annotated[float, typer.Option(help="Seconds allowed to render one page.")] = 60.0,
    max_image_pixels: Annotated[
        int | None,
        typer.Option(help="Source images over this many pixels are refused (default 400M)."),
    ] = None,
    max_pixels: Annotated[
        int | None,
        typer.Option(help="Rendered pages over this many pixels are refused (default 40M)."),
    ] = None,
    render_memory: Annotated[
        int | None,
        typer.Option(help="Memory cap of each render process, MiB (default 1536)."),
    ] = None,
    threads: Annotated[int | None, typer.Option(help="Embedded engine threads per page.")] = None,
    parallel: Annotated[
        int | None,
        typer.Option(min=1, help="Embedded engine: pages read at once (default: 2 on 2+ cores)."),
    ] = None,
    languages: Annotated[str, typer.Option(help="Tesseract languages, e.g. eng+deu.")] = "eng",
    model: Annotated[
        str | None, typer.Option(help="VLM model (HF id or path).", rich_help_panel=VLM)
    ] = None,
    server: Annotated[
        list[str] | None,
        typer.Option(help="OpenAI-compatible base URL (repeatable).", rich_help_panel=VLM),
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option(help="API key (or OPENAI_API_KEY).", rich_help_panel=VLM, show_default=False),
    ] = None,
    recipe: Annotated[
        str | None,
        typer.Option(help="olmocr, deepseek, markdown, dots, chandra.", rich_help_panel=VLM),
    ] = None,
    recipe_option: Annotated[
        list[str] | None,
        typer.Option(help="Recipe override KEY=VALUE, e.g. max_tokens=2048.", rich_help_panel=VLM),
    ] = None,
    served_model_name: Annotated[
        str | None, typer.Option(help="Model name the server uses.", rich_help_panel=VLM)
    ] = None,
    max_concurrency: Annotated[
        int | None,
        typer.Option(
            help="Requests in flight per server (default: adaptive).", rich_help_panel=VLM
        ),
    ] = None,
    max_page_error_rate: Annotated[
        float,
        typer.Option(help="Fallback share above which a document is partial.", rich_help_panel=VLM),
    ] = 0.0,
    page_deadline: Annotated[
        float, typer.Option(help="Seconds a page may take in all.", rich_help_panel=VLM)
    ] = 600.0,
    request_timeout: Annotated[
        float, typer.Option(help="Seconds one request may take.", rich_help_panel=VLM)
    ] = 180.0,
    guided: Annotated[
        bool,
        typer.Option(help="Constrain olmOCR output (structured outputs).", rich_help_panel=VLM),
    ] = False,
    gpus: Annotated[
        str | None,
        typer.Option(help="Managed vLLM: one replica per GPU, e.g. 0,1.", rich_help_panel=VLM),
    ] = None,
    vllm_arg: Annotated[
        list[str] | None,
        typer.Option(
            help="Extra `vllm serve` flag(s), e.g. '--gpu-memory-utilization 0.8'.",
            rich_help_panel=VLM,
        ),
    ] = None,
    vllm_command: Annotated[
        str, typer.Option(help="How to run vLLM.", rich_help_panel=VLM)
    ] = "vllm serve",
    ready_timeout: Annotated[
        float, typer.Option(help="Seconds to wait for servers.", rich_help_panel=VLM)
    ] = 900.0,
    unreachable_timeout: Annotated[
        float,
        typer.Option(
            help="Stop when no --server can be connected to for this long (s).",
            rich_help_panel=VLM,
        ),
    ] = 60.0,
    fail_after: Annotated[
        float,
        typer.Option(
            min=0,
            help="Stop (exit 4) when every server has failed every request this long (s; 0: "
            "never).",
            rich_help_panel=VLM,
        ),
    ] = 120.0,
    preset: Annotated[
        str | None,
        typer.Option(
            help="Managed vLLM flag preset: fp8 (FP8 KV cache and weights).", rich_help_panel=VLM
        ),
    ] = None,
    clean: Annotated[
        bool, typer.Option(help="Canonical Markdown pass (--no-clean keeps the model's text).")
    ] = True,
    roi_labels: Annotated[
        str | None,
        typer.Option(
            help="DeepSeek-OCR grounding: re-read regions of these labels, e.g. table,title.",
            rich_help_panel=VLM,
        ),
    ] = None,
    retry_large_cap: Annotated[
        int,
        typer.Option(
            help="DeepSeek-OCR grounding: pages re-read at 1280 px when a table is missing, "
            "at most (per worker).",
            rich_help_panel=VLM,
        ),
    ] = 0,
    executor: Annotated[
        str,
        typer.Option(help="local (this machine) or ray (a Ray cluster).", rich_help_panel=SCALE),
    ] = "local",
    ray_address: Annotated[
        str | None,
        typer.Option(
            help="Ray cluster address (default: start or find one).", rich_help_panel=SCALE
        ),
    ] = None,
    ray_workers: Annotated[int, typer.Option(help="Ray worker actors.", rich_help_panel=SCALE)] = 2,
    lease_ttl: Annotated[
        float,
        typer.Option(help="Seconds a work-item lease lasts unrenewed.", rich_help_panel=SCALE),
    ] = 120.0,
    shard_index: Annotated[
        int | None, typer.Option(help="This worker's static shard.", rich_help_panel=SCALE)
    ] = None,
    num_shards: Annotated[
        int | None, typer.Option(help="Number of static shards.", rich_help_panel=SCALE)
    ] = None,
    stages: Annotated[
        str,
        typer.Option(help="Stages to run: extract, describe (figures), assemble (enrich)."),
    ] = "extract",
    describe_model: Annotated[
        str | None, typer.Option(help="describe stage: its model (default: --model).")
    ] = None,
    describe_server: Annotated[
        list[str] | None,
        typer.Option(help="describe stage: its server(s) (default: --server)."),
    ] = None,
    split_pages: Annotated[
        int,
        typer.Option(
            help="Split longer documents into items of this many pages.", rich_help_panel=SCALE
        ),
    ] = 500,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            min=0, max=65535, help="Serve Prometheus /metrics on 127.0.0.1:PORT while the run goes."
        ),
    ] = None,
    metrics_linger: Annotated[
        float, typer.Option(help="Seconds /metrics stays up after the run (a last scrape).")
    ] = 0.0,
    progress_interval: Annotated[
        float,
        typer.Option(
            min=0, help="Seconds between progress lines when stderr is not a terminal (0: none)."
        ),
    ] = 10.0,
    quiet: Annotated[bool, typer.Option("-q", "--quiet", help="Only warnings and errors.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON summary.")] = False,
) -> None:
    """Convert documents to Markdown and JSONL. Exit 0: all converted; 1: some failed;
    2: a usage or set-up error; 3: OUT cannot be written; 4: the engine kept failing;
    5: nothing to convert; 130 / 143: stopped by Ctrl-C / SIGTERM."""
    _configure_logging(quiet)
    try:
        config = build_run_config(
            inputs,
            output,
            pages=pages,
            password=password,
            passwords=passwords,
            target_dim=target_dim,
            page_timeout=page_timeout,
            max_image_pixels=max_image_pixels,
            max_pixels=max_pixels,
            render_memory=render_memory,
            workers=workers,
            text_layer=text_layer,
            engine=engine,
            threads=threads,
            parallel=parallel,
            languages=languages,
            model=model,
            served_model_name=served_model_name,
            recipe=recipe,
            server=server,
            api_key=api_key,
            max_concurrency=max_concurrency,
            max_page_error_rate=max_page_error_rate,
            page_deadline=page_deadline,
            request_timeout=request_timeout,
            guided=guided,
            recipe_option=recipe_option,
            gpus=gpus,
            vllm_arg=vllm_arg,
            vllm_command=vllm_command,
            ready_timeout=ready_timeout,
            unreachable_timeout=unreachable_timeout,
            fail_after=fail_after,
            preset=preset,
            clean=clean,
            roi_labels=roi_labels,
            retry_large_cap=retry_large_cap,
            page_separator=page_separator,
            output_format=output_format,
            split_pages=split_pages,
            lease_ttl=lease_ttl,
            stages=stages,
            describe_model=describe_model,
            describe_server=describe_server,
            dataset_column=dataset_column,
            dataset_id_column=dataset_id_column,
        )
        check_before_start(config)
        skipped = Skipped()
        sources = expand_inputs(
            config.inputs, exclude=[config.output], options=config.input, skipped=skipped
        )
        if not sources:
            raise _nothing_to_convert(skipped, as_json=as_json)
        worker = worker_options(config.scale, shard_index, num_shards)
        with serve_metrics(metrics_port, linger_s=metrics_linger) as metrics:
            plan = Plan(
                config,
                sources,
                worker,
                executor,
                ray_address,
                ray_workers,
                metrics,
                progress_interval_s=progress_interval,
                skipped=skipped,
            )
            stats = _run_with_display(plan, quiet=quiet or as_json)
            later = run_later_stages(config, quiet=quiet or as_json)
    except ValidationError as exc:
        raise _fail(_validation_message(exc)) from None
    except (OutputError, EngineFailing, ExceptionGroup) as exc:
        raise _output_failure(exc) from None
    except OcrflowError as exc:
        raise _fail(str(exc)) from None
    except OSError as exc:
        raise _fail(f"{exc.strerror or exc}: {exc.filename or ''}") from None
    except backend_errors() as exc:  # the object store's client: no credentials, no endpoint
        typer.echo(f"error: cannot write {output}: {backend_message(exc)}", err=True)
        raise typer.Exit(OUTPUT_ERROR) from None
    if as_json:
        typer.echo(json.dumps(stats.record() | {"failures": stats.failures, "out": stats.out}))
    elif not quiet:
        print_run_summary(stats, output)
    raise typer.Exit(max(stats.exit_code(), later))


def _run_with_display(plan: Plan, *, quiet: bool) -> RunStats:
    try:
        stats = execute_plan(plan, quiet=quiet)
        # Other runs and workers may have shared OUT: the summary shows the whole of it too.
        stats.out = out_summary(Workspace(open_store(plan.config.output)))
        return stats
    except (KeyboardInterrupt, asyncio.CancelledError):
        Console(stderr=True).print(RESUME_HINT, highlight=False)
        raise typer.Exit(interrupted_exit_code()) from None


def _nothing_to_convert(skipped: Skipped, *, as_json: bool) -> typer.Exit:
    """Exit 5 when the inputs hold no document at all, saying what they held instead."""
    held = f" (left out: {skipped.summary()})" if skipped.counts else ""
    message = f"nothing to convert: the inputs hold no PDF or image{held}"
    if as_json:
        typer.echo(json.dumps({"documents": {}, "files_skipped": dict(skipped.counts),
                               "error": message}))  # fmt: skip
    typer.echo(f"error: {message}", err=True)
    for reason, names in skipped.examples.items():
        typer.echo(f"  {reason}: {', '.join(names)}", err=True)
    return typer.Exit(NOTHING_TO_CONVERT)


def _validation_message(exc: ValidationError) -> str:
    return validation_message(exc)  # names the flag, not the field (``ocrflow.flags``)


@app.command()
@stoppable
def retry(
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
        str | None, typer.Option(help="API key (or OPENAI_API_KEY).", show_default=False)
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
    quiet: Annotated[bool, typer.Option("-q", "--quiet")] = False,
) -> None:
    """Re-queue partial and failed documents of a run, then convert them again."""
    _configure_logging(quiet)
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
        stats = _run_with_display(plan, quiet=quiet)
    except (OutputError, EngineFailing, ExceptionGroup) as exc:
        raise _output_failure(exc) from None
    except OcrflowError as exc:
        raise _fail(str(exc)) from None
    except ValidationError as exc:
        raise _fail(_validation_message(exc)) from None
    if not quiet:
        print_run_summary(stats, output)
    raise typer.Exit(stats.exit_code())


@app.command()
@stoppable
def worker(
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
        str | None, typer.Option(help="API key (or OPENAI_API_KEY).", show_default=False)
    ] = None,
    workers: Annotated[int | None, typer.Option(min=1, help="Render processes.")] = None,
    progress_interval: Annotated[
        float,
        typer.Option(
            min=0, help="Seconds between progress lines when stderr is not a terminal (0: none)."
        ),
    ] = 10.0,
    quiet: Annotated[bool, typer.Option("-q", "--quiet")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON summary.")] = False,
) -> None:
    """Join an existing run: take work items from OUT until none is left (or, with --root,
    work on the queued jobs of an `ocrflow serve` root, fair share across jobs)."""
    _configure_logging(quiet)
    if (output is None) == (root is None):
        raise _fail("give OUT (a run to join) or --root ROOT (a job service's jobs)")
    if root is not None:
        from ocrflow.service.command import work_root

        if not (root / "jobs").is_dir():  # else it would wait for jobs that never come
            raise _fail(f"--root {root} is not an ocrflow serve root (it has no jobs/ folder)")

        job = work_root(root, slots, api_key, server or (), workers, lease_ttl, exit_when_idle)
        with contextlib.suppress(KeyboardInterrupt, asyncio.CancelledError):
            run_until_signal(job)  # type: ignore[arg-type]
        raise typer.Exit(0)
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
        stats = _run_with_display(plan, quiet=quiet or as_json)
    except (OutputError, EngineFailing, ExceptionGroup) as exc:
        raise _output_failure(exc) from None
    except OcrflowError as exc:
        raise _fail(str(exc)) from None
    if as_json:
        typer.echo(json.dumps(stats.record() | {"failures": stats.failures, "out": stats.out}))
    elif not quiet:
        print_run_summary(stats, output)
    raise typer.Exit(stats.exit_code())


@app.command("serve-engine")
def serve_engine(
    model: Annotated[str, typer.Option(help="Model to serve (HF id or path).")],
    recipe: Annotated[str | None, typer.Option(help="Recipe whose server flags to use.")] = None,
    served_model_name: Annotated[str | None, typer.Option(help="Name clients use.")] = None,
    gpus: Annotated[str | None, typer.Option(help="One replica per GPU, e.g. 0,1.")] = None,
    port: Annotated[int, typer.Option(help="First port (0: any free ports).")] = 8000,
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    vllm_arg: Annotated[list[str] | None, typer.Option(help="Extra `vllm serve` flags.")] = None,
    vllm_command: Annotated[str, typer.Option(help="How to run vLLM.")] = "vllm serve",
    log_dir: Annotated[str | None, typer.Option(help="Folder for server logs.")] = None,
    ready_timeout: Annotated[float, typer.Option(help="Seconds to wait for readiness.")] = 900.0,
) -> None:
    """Start vLLM with a recipe's flags and keep it up (restarts included) until Ctrl-C."""
    _configure_logging(quiet=False)
    from ocrflow.engines.server import ManagedServers, ServerSpec
    from ocrflow.engines.session import api_key
    from ocrflow.recipes.registry import recipe_for_model

    try:
        chosen = recipe_for_model(model, recipe)
        options = EngineOptions(kind="vllm", model=model)
        spec = ServerSpec(
            model=model,
            served_model_name=served_model_name or model,
            flags=(*chosen.server_flags, *(f for a in vllm_arg or () for f in shlex.split(a))),
            gpus=tuple(g for g in (gpus or "").split(",") if g),
            host=host,
            base_port=port,
            command=tuple(shlex.split(vllm_command)),
            log_dir=log_dir,
            ready_timeout_s=ready_timeout,
            api_key=api_key(options),
        )
        run_until_signal(_serve_forever(ManagedServers(spec)))
    except OcrflowError as exc:
        raise _fail(str(exc)) from None
    except (KeyboardInterrupt, asyncio.CancelledError):
        raise typer.Exit(0) from None


async def _serve_forever(servers: Any) -> Any:
    async with servers:
        for url in servers.urls:
            typer.echo(f"serving {url}")
        await asyncio.Event().wait()


@app.command()
def export(
    output: Annotated[str, typer.Argument(help="The output directory or URL of a run.")],
    dest: Annotated[str, typer.Argument(help="Folder or URL to write the dataset to.")],
    fmt: Annotated[
        str,
        typer.Option(
            "--format", help="parquet: Parquet shards; hf: a folder datasets.load_from_disk opens."
        ),
    ] = "parquet",
    overwrite: Annotated[
        bool,
        typer.Option(help="Export into a folder holding files export did not write."),
    ] = False,
) -> None:
    """Convert the finished documents of OUT into Parquet shards or a Hugging Face dataset.
    Exporting again into the same folder replaces the earlier export."""
    from ocrflow.export import export as export_out

    if fmt not in {"parquet", "hf"}:
        raise _fail(f"unknown export format {fmt!r}: use parquet or hf")
    try:
        report = export_out(output, fmt, dest, overwrite=overwrite)  # type: ignore[arg-type]
    except OutputError as exc:
        raise _output_failure(exc) from None
    except OcrflowError as exc:
        raise _fail(str(exc)) from None
    typer.echo(f"exported {report.rows} documents to {dest} ({len(report.files)} files)")


@app.command()
def status(
    output: Annotated[str, typer.Argument(help="An output directory or URL of a run.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    gpu_hour_cost: Annotated[
        float | None, typer.Option(help="Price of a GPU hour, for cost per 1,000 pages.")
    ] = None,
) -> None:
    """Show documents and pages by state, failures by reason, and speed."""
    try:
        workspace = Workspace(open_store(output))
        if not workspace.recorded_config():
            raise _fail(f"{output} holds no ocrflow run")
        report = collect_status(workspace, gpu_hour_cost=gpu_hour_cost)
    except OutputError as exc:
        raise _output_failure(exc) from None
    except OcrflowError as exc:
        raise _fail(str(exc)) from None
    if as_json:
        typer.echo(json.dumps(report))
        return
    print_status(report)


app.command("describe")(describe_command)
app.command("assemble")(assemble_command)
app.command("eval")(eval_command)
app.command("review")(review_command)
app.command("serve")(serve_command)


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
