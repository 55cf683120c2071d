"""The ``ocrflow`` command. Each command builds a config and calls one function; this
module only gathers them into one Typer app."""

from __future__ import annotations

import typer

from ocrflow.cli.run import run_command
from ocrflow.cli.runs import export_command, retry_command, status_command, worker_command
from ocrflow.cli.serve_engine import serve_engine_command
from ocrflow.evaluation.command import eval_command
from ocrflow.review.command import review_command
from ocrflow.service.command import serve_command
from ocrflow.stages.commands import assemble_command, describe_command

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="ocrflow: PDFs, scans and photos to Markdown and JSONL, with VLMs or a CPU engine.",
)
app.command("run")(run_command)
app.command("retry")(retry_command)
app.command("worker")(worker_command)
app.command("serve-engine")(serve_engine_command)
app.command("export")(export_command)
app.command("status")(status_command)
app.command("describe")(describe_command)
app.command("assemble")(assemble_command)
app.command("eval")(eval_command)
app.command("review")(review_command)
app.command("serve")(serve_command)


def main() -> None:
    """Console-script entry point."""
    app()
