"""``ocrflow eval``: bench tests and ground-truth scores for one run or several side by side."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape

from ocrflow.errors import OcrflowError, require
from ocrflow.observe.logs import Quiet, Verbose, configure_logging, verbosity

if TYPE_CHECKING:
    from ocrflow.evaluation.evaluate import RunEvaluation

USAGE_ERROR = 2


def _evaluate(locations: list[str], tests_file: Path | None, truth: Path | None) -> list:
    # Imported here: every `ocrflow` command loads this module, and only eval needs
    # rapidfuzz and the checks (a GPU host running `ocrflow run` may not have them).
    require("rapidfuzz", extra="eval", feature="ocrflow eval")
    from ocrflow.evaluation.bench import load_tests
    from ocrflow.evaluation.documents import load_run
    from ocrflow.evaluation.evaluate import evaluate_run

    tests = load_tests(tests_file) if tests_file else []
    return [evaluate_run(load_run(location), tests, truth) for location in locations]


def eval_command(
    output: Annotated[str, typer.Argument(help="An OUT of `ocrflow run` (or a bench folder).")],
    tests: Annotated[
        Path | None,
        typer.Option("--tests", help="olmOCR-bench tests (JSONL) matched by PDF name and page."),
    ] = None,
    truth: Annotated[
        Path | None,
        typer.Option(help="Folder of ground-truth .txt/.md files named after the documents."),
    ] = None,
    compare: Annotated[
        list[str] | None,
        typer.Option(help="Another OUT to put beside the first one (repeatable)."),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="One JSON object with per-test results.")
    ] = False,
    verbose: Verbose = False,
    quiet: Quiet = False,
) -> None:
    """Score a run: olmOCR-bench unit tests (--tests) and CER / word F1 (--truth)."""
    configure_logging(verbosity(verbose, quiet))
    console = Console(stderr=True)
    if tests is None and truth is None:
        console.print("[red]error:[/] give --tests FILE.jsonl and/or --truth DIR")
        raise typer.Exit(USAGE_ERROR)
    if truth is not None and not truth.is_dir():
        console.print(f"[red]error:[/] --truth {escape(str(truth))}: not a folder")
        raise typer.Exit(USAGE_ERROR)
    try:
        evaluations: list[RunEvaluation] = _evaluate([output, *(compare or [])], tests, truth)
    except (OcrflowError, OSError) as exc:
        console.print(f"[red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        raise typer.Exit(USAGE_ERROR) from None
    from ocrflow.evaluation.report import evaluation_json, print_evaluations

    if as_json:
        typer.echo(json.dumps({"runs": [evaluation_json(e) for e in evaluations]}, indent=1))
    else:
        print_evaluations(Console(), evaluations)
