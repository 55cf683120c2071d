"""``ocrflow describe`` and ``ocrflow assemble``, and the later stages of ``ocrflow run
--stages extract,describe,assemble``. Each builds its config and calls one function."""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.console import Console

from ocrflow.config import EngineOptions, RunConfig
from ocrflow.config.builder import build_run_config
from ocrflow.config.flags import validation_message
from ocrflow.errors import OcrflowError, OutputError
from ocrflow.executors.plan import run_until_signal
from ocrflow.observe.logs import Quiet, Verbose, configure_logging, verbosity
from ocrflow.stages.assemble import AssembleStats, assemble
from ocrflow.stages.describe import DescribeConfig, DescribeStats, describe
from ocrflow.storage.open import open_store
from ocrflow.workspace.state import Workspace

VLM = "VLM engine (default: the one OUT was made with)"


def describe_engine(config: RunConfig, **options: Any) -> EngineOptions:
    """The engine for describe: ``config``'s engine with ``options`` (``ocrflow run``'s flag
    names, read by ``build_run_config``; ``None`` or empty keeps the value). The OCR
    recipe's settings do not apply to figure prompts; a managed server takes its flags from
    the model's name."""
    given = {k: v for k, v in options.items() if v not in (None, (), [], "")}
    resets: dict[str, Any] = {"recipe": None, "recipe_options": {}, "guided": False}
    if "engine" not in given and config.engine.kind not in {"openai", "vllm"}:
        resets["kind"] = "openai"
    if given.get("engine", "vllm") != "vllm":  # a preset names flags of a managed server
        resets["preset"] = None
    base = config.model_copy(update={"engine": config.engine.model_copy(update=resets)})
    return build_run_config(config.inputs, config.output, base=base, **given).engine


def run_describe(config: DescribeConfig, *, quiet: bool) -> DescribeStats:
    """Run the describe stage until every figure has an answer (Ctrl-C/SIGTERM stop it)."""
    workspace = Workspace(open_store(config.output))
    stats = run_until_signal(describe(config, workspace))
    if not quiet:
        Console(stderr=True).print(
            f"described {stats.described} of {stats.figures} figures "
            f"({stats.already} already described, {stats.failed} failed) in "
            f"{stats.elapsed_s:.1f} s",
            highlight=False,
        )
    return stats


def run_assemble(output: str, *, quiet: bool) -> AssembleStats:
    """Run the assemble stage."""
    stats = assemble(Workspace(open_store(output)))
    if not quiet:
        Console(stderr=True).print(
            f"assembled {stats.documents} documents with {stats.figures} figures "
            f"({stats.described} described)",
            highlight=False,
        )
    return stats


def run_later_stages(config: RunConfig, *, quiet: bool) -> int:
    """After extract: describe and/or assemble as ``config.stages`` asks; 1 when some
    figure could not be described, else 0. Ctrl-C exits 130 (a rerun resumes)."""
    try:
        return _later_stages(config, quiet=quiet)
    except (KeyboardInterrupt, asyncio.CancelledError):
        raise _fail("interrupted: run the same command again to resume", 130) from None


def _later_stages(config: RunConfig, *, quiet: bool) -> int:
    options = config.stages
    code = 0
    if "describe" in options.stages:
        engine = describe_engine(
            config, model=options.describe_model, server=options.describe_servers
        )
        if options.describe_model:  # another model: not the extract model's served name
            engine = engine.model_copy(update={"served_model_name": None})
        stats = run_describe(
            DescribeConfig(config.output, engine, lease_ttl_s=config.scale.lease_ttl_s),
            quiet=quiet,
        )
        code = 1 if stats.failed else 0
    if "assemble" in options.stages:
        run_assemble(config.output, quiet=quiet)
    return code


def _fail(message: str, code: int = 2) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


def describe_command(
    output: Annotated[str, typer.Argument(help="The output directory or URL of a run.")],
    task: Annotated[str, typer.Option(help="caption, parse (to a table) or classify.")] = "caption",
    prompt: Annotated[
        str | None, typer.Option(help="Your own prompt (default: the task's).")
    ] = None,
    labels: Annotated[
        str | None, typer.Option(help="Only figures with these labels, e.g. image,chart,table.")
    ] = None,
    max_tokens: Annotated[int, typer.Option(help="Output tokens per answer.")] = 1024,
    engine: Annotated[str | None, typer.Option(help="openai or vllm.", rich_help_panel=VLM)] = None,
    model: Annotated[str | None, typer.Option(help="VLM model.", rich_help_panel=VLM)] = None,
    server: Annotated[
        list[str] | None, typer.Option(help="Base URL (repeatable).", rich_help_panel=VLM)
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option(
            help="API key (else OCRFLOW_API_KEY, else OPENAI_API_KEY).",
            rich_help_panel=VLM,
            show_default=False,
        ),
    ] = None,
    served_model_name: Annotated[
        str | None, typer.Option(help="Model name the server uses.", rich_help_panel=VLM)
    ] = None,
    max_concurrency: Annotated[
        int | None, typer.Option(help="Requests in flight per server.", rich_help_panel=VLM)
    ] = None,
    request_timeout: Annotated[
        float | None, typer.Option(help="Seconds one request may take.", rich_help_panel=VLM)
    ] = None,
    gpus: Annotated[
        str | None, typer.Option(help="Managed vLLM: GPUs, e.g. 0,1.", rich_help_panel=VLM)
    ] = None,
    vllm_arg: Annotated[
        list[str] | None, typer.Option(help="Extra `vllm serve` flag(s).", rich_help_panel=VLM)
    ] = None,
    ready_timeout: Annotated[
        float | None, typer.Option(help="Seconds to wait for servers.", rich_help_panel=VLM)
    ] = None,
    lease_ttl: Annotated[float, typer.Option(help="Seconds a lease lasts unrenewed.")] = 120.0,
    verbose: Verbose = False,
    quiet: Quiet = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON summary.")] = False,
) -> None:
    """Stage 2: ask a VLM about every figure of OUT (one request a figure; resumable; many
    processes may share OUT). Exit 0: all described; 1: some failed; 2: usage; 3: OUT."""
    configure_logging(verbosity(verbose, quiet))
    try:
        recorded = Workspace(open_store(output)).recorded_run_config()
        options = describe_engine(
            recorded, engine=engine, model=model, server=server, api_key=api_key,
            served_model_name=served_model_name, max_concurrency=max_concurrency,
            request_timeout=request_timeout, gpus=gpus, vllm_arg=vllm_arg,
            ready_timeout=ready_timeout,
        )  # fmt: skip
        if model and model != recorded.engine.model and not served_model_name:
            options = options.model_copy(update={"served_model_name": None})
        chosen = tuple(x.strip() for x in (labels or "").split(",") if x.strip())
        config = DescribeConfig(output, options, task, prompt, chosen, max_tokens, lease_ttl)
        stats = run_describe(config, quiet=quiet or as_json)
    except ValidationError as exc:
        raise _fail(validation_message(exc)) from None
    except OutputError as exc:
        raise _fail(str(exc), 3) from None
    except OcrflowError as exc:
        raise _fail(str(exc)) from None
    except (KeyboardInterrupt, asyncio.CancelledError):
        raise _fail("interrupted: run the same command again to resume", 130) from None
    if as_json:
        typer.echo(json.dumps(stats.record()))
    raise typer.Exit(1 if stats.failed else 0)


def assemble_command(
    output: Annotated[str, typer.Argument(help="The output directory or URL of a run.")],
    verbose: Verbose = False,
    quiet: Quiet = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON summary.")] = False,
) -> None:
    """Stage 3: write each document with figures again, with the figures' descriptions
    (alt text and a paragraph or table after each link). Sends nothing to a model."""
    configure_logging(verbosity(verbose, quiet))
    try:
        stats = run_assemble(output, quiet=quiet or as_json)
    except OutputError as exc:
        raise _fail(str(exc), 3) from None
    except OcrflowError as exc:
        raise _fail(str(exc)) from None
    if as_json:
        typer.echo(json.dumps(stats.record()))
