"""``ocrflow run``: its flags become a ``RunConfig`` (``build_run_config``, the builder the
Python API and the job service use too), then the plan runs here or on Ray, then the later
stages."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError

from ocrflow.cli.display import run_with_display, show_summary
from ocrflow.cli.exits import OUTPUT_ERROR, fail, nothing_to_convert, output_failure
from ocrflow.cli.ocrmypdf_names import (
    Deskew,
    ForceOcr,
    Pdfa,
    RedoOcr,
    RotatePages,
    Sidecar,
    SkipText,
)
from ocrflow.config.builder import build_run_config, option_default
from ocrflow.config.environment import shard_settings
from ocrflow.config.flags import validation_message
from ocrflow.errors import EngineFailing, OcrflowError, OutputError
from ocrflow.executors.interrupts import stoppable
from ocrflow.executors.plan import EXECUTORS, Plan, shard_note, worker_options
from ocrflow.executors.preflight import check_before_start
from ocrflow.executors.shards import choose_shard
from ocrflow.inputs.expand import expand_inputs
from ocrflow.inputs.skips import Skipped
from ocrflow.observe.logs import Quiet, Verbose, configure_logging, verbosity
from ocrflow.observe.metrics import serve_metrics
from ocrflow.recipes.registry import RECIPES
from ocrflow.sinks import KNOWN_FORMATS
from ocrflow.stages.commands import run_later_stages
from ocrflow.storage.fsspec_store import backend_errors, backend_message

#: The registries name the choices: a new format, executor or recipe needs no edit here.
FORMATS = ", ".join(KNOWN_FORMATS)
EXECUTOR_NAMES = " or ".join(EXECUTORS)
RECIPE_NAMES = ", ".join(RECIPES)

VLM = "VLM engines (--engine openai / vllm)"
SCALE = "Scale-out (many workers, Ray)"
#: Flags of how this batch runs and what it prints; every other flag is an option of
#: ``build_run_config``, under the same name.
BATCH_FLAGS = frozenset(
    {"executor", "ray_address", "ray_workers", "shard", "shard_index", "num_shards"}
    | {"metrics_port", "metrics_linger", "progress_interval", "verbose", "quiet", "as_json"}
)


@stoppable
def run_command(
    inputs: Annotated[
        list[str], typer.Argument(help="Files, directories, globs, @list.txt, URLs.")
    ],
    output: Annotated[str, typer.Option("-o", "--output", help="Output directory or URL.")],
    pages: Annotated[str | None, typer.Option(help="Pages to convert, e.g. 1-5,9,20-end.")] = None,
    text_layer: Annotated[
        str,
        typer.Option(
            help="auto: use good native text; off: always OCR; only: never OCR; redo: as auto, "
            "but hidden text (an earlier OCR's) is OCR'd again and replaced in --format pdf."
        ),
    ] = option_default("text_layer"),
    skip_text: SkipText = False,
    force_ocr: ForceOcr = False,
    redo_ocr: RedoOcr = False,
    sidecar: Sidecar = False,
    pdfa: Pdfa = False,
    rotate_pages: RotatePages = False,
    deskew: Deskew = False,
    engine: Annotated[
        str,
        typer.Option(
            help="embedded (CPU, default), tesseract, openai (a server), vllm (we start it)."
        ),
    ] = option_default("engine"),
    target_dim: Annotated[
        int | None, typer.Option(help="Longest side of rendered pages, px (default: the engine's).")
    ] = None,
    dpi: Annotated[
        int | None,
        typer.Option(
            help="Render every page at this resolution (default: the engine's; CPU engines "
            "read scans at their own, at most 400 dpi)."
        ),
    ] = None,
    page_separator: Annotated[
        bool, typer.Option(help="Mark pages in the Markdown.")
    ] = option_default("page_separator"),
    output_format: Annotated[
        str,
        typer.Option("--format", help=f"Output formats, comma-separated: {FORMATS}."),
    ] = option_default("output_format"),
    chunk_tokens: Annotated[
        int, typer.Option(help="chunks: the most tokens a chunk holds (tables stay whole).")
    ] = option_default("chunk_tokens"),
    drop_headers_footers: Annotated[
        bool,
        typer.Option(
            help="Leave page headers and footers out of Markdown, text and chunks "
            "(json, alto, hocr keep them)."
        ),
    ] = option_default("drop_headers_footers"),
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
    page_timeout: Annotated[
        float, typer.Option(help="Seconds allowed to render one page.")
    ] = option_default("page_timeout"),
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
    languages: Annotated[
        str,
        typer.Option(
            "-l",
            "--languages",
            help="Tesseract languages, e.g. eng+deu (the embedded engine needs none).",
        ),
    ] = option_default("languages"),
    embedded_backend: Annotated[
        str,
        typer.Option(
            help="Embedded engine runtime: auto (OpenVINO where installed, else ONNX "
            "Runtime), openvino or onnxruntime."
        ),
    ] = option_default("embedded_backend"),
    embedded_charset: Annotated[
        str,
        typer.Option(
            help="Embedded engine characters: auto (a recogniser cut down to Latin, Greek "
            "and Cyrillic first on alphabetic pages; OpenVINO) or all."
        ),
    ] = option_default("embedded_charset"),
    model: Annotated[
        str | None, typer.Option(help="VLM model (HF id or path).", rich_help_panel=VLM)
    ] = None,
    server: Annotated[
        list[str] | None,
        typer.Option(help="OpenAI-compatible base URL (repeatable).", rich_help_panel=VLM),
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option(
            help="API key (else OCRFLOW_API_KEY, else OPENAI_API_KEY).",
            rich_help_panel=VLM,
            show_default=False,
        ),
    ] = None,
    recipe: Annotated[
        str | None,
        typer.Option(help=f"{RECIPE_NAMES} (default: by the model's name).", rich_help_panel=VLM),
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
    ] = option_default("max_page_error_rate"),
    page_deadline: Annotated[
        float, typer.Option(help="Seconds a page may take in all.", rich_help_panel=VLM)
    ] = option_default("page_deadline"),
    request_timeout: Annotated[
        float, typer.Option(help="Seconds one request may take.", rich_help_panel=VLM)
    ] = option_default("request_timeout"),
    guided: Annotated[
        bool,
        typer.Option(help="Constrain olmOCR output (structured outputs).", rich_help_panel=VLM),
    ] = option_default("guided"),
    logprobs: Annotated[
        bool,
        typer.Option(
            help="Ask for token log-probabilities: a page confidence signal (replies grow by"
            " ~100 B a token, x20; docs/confidence.md).",
            rich_help_panel=VLM,
        ),
    ] = option_default("logprobs"),
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
    ] = option_default("vllm_command"),
    ready_timeout: Annotated[
        float, typer.Option(help="Seconds to wait for servers.", rich_help_panel=VLM)
    ] = option_default("ready_timeout"),
    unreachable_timeout: Annotated[
        float,
        typer.Option(
            help="Stop when no --server can be connected to for this long (s).",
            rich_help_panel=VLM,
        ),
    ] = option_default("unreachable_timeout"),
    fail_after: Annotated[
        float,
        typer.Option(
            min=0,
            help="Stop (exit 4) when every server has failed every request this long (s; 0: "
            "never).",
            rich_help_panel=VLM,
        ),
    ] = option_default("fail_after"),
    preset: Annotated[
        str | None,
        typer.Option(
            help="Managed vLLM flag preset: fp8 (FP8 KV cache and weights).", rich_help_panel=VLM
        ),
    ] = None,
    clean: Annotated[
        bool, typer.Option(help="Canonical Markdown pass (--no-clean keeps the model's text).")
    ] = option_default("clean"),
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
    ] = option_default("retry_large_cap"),
    executor: Annotated[
        str,
        typer.Option(help=f"How to run the batch: {EXECUTOR_NAMES}.", rich_help_panel=SCALE),
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
    ] = option_default("lease_ttl"),
    shard: Annotated[
        str | None,
        typer.Option(
            help="Convert a stable 1/N of the inputs: I/N (I from 0), or auto (from "
            "OCRFLOW_SHARD_INDEX/_COUNT, a Kubernetes Indexed Job, SLURM array, Cloud Run job).",
            rich_help_panel=SCALE,
        ),
    ] = None,
    shard_index: Annotated[
        int | None, typer.Option(help="Older form of --shard I/N: I.", rich_help_panel=SCALE)
    ] = None,
    num_shards: Annotated[
        int | None, typer.Option(help="Older form of --shard I/N: N.", rich_help_panel=SCALE)
    ] = None,
    stages: Annotated[
        str,
        typer.Option(help="Stages to run: extract, describe (figures), assemble (enrich)."),
    ] = option_default("stages"),
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
    ] = option_default("split_pages"),
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
    verbose: Verbose = False,
    quiet: Quiet = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON summary.")] = False,
) -> None:
    """Convert documents to Markdown and JSONL. Exit 0: all converted; 1: some failed;
    2: a usage or set-up error; 3: OUT cannot be written; 4: the engine kept failing;
    5: nothing to convert; 130 / 143: stopped by Ctrl-C / SIGTERM."""
    # First of all, while the flags are the only locals: one name for each flag, not three.
    flags = {name: value for name, value in locals().items() if name not in BATCH_FLAGS}
    configure_logging(verbosity(verbose, quiet))
    try:
        config = build_run_config(**flags)
        check_before_start(config)
        worker = worker_options(
            config.scale, shard=choose_shard(shard, shard_index, num_shards, shard_settings())
        )
        skipped = Skipped()
        sources = expand_inputs(
            config.inputs, exclude=[config.output], options=config.input, skipped=skipped
        )
        if not sources:
            raise nothing_to_convert(skipped, as_json=as_json)
        with serve_metrics(metrics_port, linger_s=metrics_linger) as metrics:
            plan = Plan(
                config, sources, worker, executor, ray_address, ray_workers, metrics,
                progress_interval_s=progress_interval, skipped=skipped,
            )  # fmt: skip
            stats = run_with_display(plan, quiet=quiet or as_json)
            later = run_later_stages(config, quiet=quiet or as_json)
    except ValidationError as exc:
        raise fail(validation_message(exc)) from None
    except (OutputError, EngineFailing, ExceptionGroup) as exc:
        raise output_failure(exc) from None
    except OcrflowError as exc:
        raise fail(str(exc)) from None
    except OSError as exc:
        raise fail(f"{exc.strerror or exc}: {exc.filename or ''}") from None
    except backend_errors() as exc:  # the object store's client: no credentials, no endpoint
        typer.echo(f"error: cannot write {output}: {backend_message(exc)}", err=True)
        raise typer.Exit(OUTPUT_ERROR) from None
    show_summary(stats, output, quiet=quiet, as_json=as_json)
    note = shard_note(plan)
    if note and not quiet:
        typer.echo(note, err=True)
    raise typer.Exit(max(stats.exit_code(), later))
