"""What the ``ocrflow`` commands show: a plan run under its progress display,
and the run's summary (a table, or one JSON object with ``--json``)."""

from __future__ import annotations

import asyncio
import json

import typer
from rich.console import Console

from ocrflow.executors.interrupts import RESUME_HINT, interrupted_exit_code
from ocrflow.executors.plan import Plan, execute_plan
from ocrflow.observe.report import print_run_summary
from ocrflow.observe.runstats import RunStats
from ocrflow.observe.status import out_summary
from ocrflow.storage.open import open_store
from ocrflow.workspace.state import Workspace


def run_with_display(plan: Plan, *, quiet: bool) -> RunStats:
    """Execute ``plan``; a stop by Ctrl-C prints how to resume and exits 130 (143: SIGTERM)."""
    try:
        stats = execute_plan(plan, quiet=quiet)
        # Other runs and workers may have shared OUT: the summary shows the whole of it too.
        stats.out = out_summary(Workspace(open_store(plan.config.output)))
        return stats
    except (KeyboardInterrupt, asyncio.CancelledError):
        Console(stderr=True).print(RESUME_HINT, highlight=False)
        raise typer.Exit(interrupted_exit_code()) from None


def show_summary(stats: RunStats, output: str, *, quiet: bool, as_json: bool = False) -> None:
    """Print the run's summary: one JSON object, a table, or nothing when ``quiet``."""
    if as_json:
        typer.echo(json.dumps(stats.record() | {"failures": stats.failures, "out": stats.out}))
    elif not quiet:
        print_run_summary(stats, output)
