"""Print evaluations: rich tables side by side (one column per run) or one JSON object."""

from __future__ import annotations

import dataclasses
from pathlib import PurePosixPath
from typing import Any

from rich.console import Console
from rich.table import Table

from ocrflow.evaluation.evaluate import RunEvaluation
from ocrflow.evaluation.metrics import TextScores

MAX_FAILURES_SHOWN = 15


def run_label(location: str) -> str:
    """A short column title for a run: the last part of its path."""
    return PurePosixPath(location.rstrip("/")).name or location


def _scores_json(scores: TextScores) -> dict[str, Any]:
    return dataclasses.asdict(scores)


def evaluation_json(evaluation: RunEvaluation) -> dict[str, Any]:
    """One run's evaluation as plain JSON data."""
    rates = {
        key: {"passed": r.passed, "total": r.total, "rate": r.rate}
        for key, r in evaluation.rates.items()
    }
    truth = None
    if evaluation.overall is not None:
        truth = {
            "documents": [
                {"document": d.document, "truth": d.truth, **_scores_json(d.scores)}
                for d in evaluation.documents
            ],
            "overall": _scores_json(evaluation.overall),
        }
    return {
        "run": evaluation.location,
        "pass_rates": rates,
        "tests": [dataclasses.asdict(r) for r in evaluation.results],
        "truth": truth,
    }


def _runs_table(title: str, rows: str, evaluations: list[RunEvaluation]) -> Table:
    """A table with a column naming its rows, then one column per run."""
    table = Table(title=title)
    table.add_column(rows)
    for evaluation in evaluations:
        table.add_column(run_label(evaluation.location), justify="right")
    return table


def _rate_cell(evaluation: RunEvaluation, key: str) -> str:
    rate = evaluation.rates.get(key)
    return f"{rate.rate:.1%} ({rate.passed}/{rate.total})" if rate else "-"


def pass_rate_table(evaluations: list[RunEvaluation]) -> Table:
    """Pass rate per test type (rows) and run (columns)."""
    table = _runs_table("olmOCR-bench tests: pass rate", "test type", evaluations)
    keys = list(dict.fromkeys(k for e in evaluations for k in e.rates if k != "overall"))
    for key in [*keys, "overall"]:
        style = "bold" if key == "overall" else None
        table.add_row(key, *(_rate_cell(e, key) for e in evaluations), style=style)
    return table


def _score_cell(scores: TextScores | None) -> str:
    return f"{scores.cer:.2%} / {scores.word_f1:.3f}" if scores else "-"


def truth_table(evaluations: list[RunEvaluation]) -> Table:
    """CER / word F1 per document (rows) and run (columns), overall last."""
    table = _runs_table(
        "Ground truth: CER / word F1 (CER is order-sensitive)", "document", evaluations
    )
    per_run = [{d.document: d.scores for d in e.documents} for e in evaluations]
    for name in sorted({n for scores in per_run for n in scores}):
        table.add_row(name, *(_score_cell(scores.get(name)) for scores in per_run))
    table.add_row("overall", *(_score_cell(e.overall) for e in evaluations), style="bold")
    return table


def print_failures(console: Console, evaluation: RunEvaluation) -> None:
    """The first failed tests of one run, with the reason."""
    failed = [r for r in evaluation.results if not r.passed]
    for result in failed[:MAX_FAILURES_SHOWN]:
        console.print(
            f"[red]FAIL[/] {result.id} ({result.type}, {result.pdf} p{result.page}): "
            f"{result.explanation}",
            highlight=False,
            markup=True,
        )
    if len(failed) > MAX_FAILURES_SHOWN:
        console.print(f"… and {len(failed) - MAX_FAILURES_SHOWN} more (--json lists all)")


def print_evaluations(console: Console, evaluations: list[RunEvaluation]) -> None:
    """Tables for the runs; with one run, also its first failures."""
    if any(e.results for e in evaluations):
        console.print(pass_rate_table(evaluations))
        if len(evaluations) == 1:
            print_failures(console, evaluations[0])
    if any(e.overall is not None for e in evaluations):
        console.print(truth_table(evaluations))
