"""The ``ocrflow`` command. Each command builds a config and calls one function; this
module only gathers them into one Typer app."""

from __future__ import annotations

from typing import Annotated

import typer

from ocrflow import __version__
from ocrflow.cli.recipes import recipes_command
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


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"ocrflow {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_show_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """ocrflow: PDFs, scans and photos to Markdown and JSONL, with VLMs or a CPU engine."""


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
app.command("recipes")(recipes_command)


def main() -> None:
    """Console-script entry point: run the command, then leave (``leave_at_once``)."""
    import gc
    import importlib.util
    import sys

    script = sys.modules["__main__"]
    if getattr(script, "__spec__", None) is None:
        script.__spec__ = importlib.util.find_spec("ocrflow.__main__")
    # What the imports made lives as long as the process: the collector need not walk it
    # again, in a run's collections nor in the last one at exit (0.14 s of every command).
    gc.freeze()
    try:
        app()
    except SystemExit as done:
        if isinstance(done.code, int | None):
            leave_at_once(done.code or 0)
        raise


def leave_at_once(code: int) -> None:
    """End the process with ``code`` now that the command is done, without tearing it
    down; return instead when a thread is still at work (the interpreter's exit then
    stops and waits for it, as usual).

    The command has closed what it wrote by now. What an interpreter's exit would add is
    freeing every object one by one, the embedded engine's models with their runtime's
    threads among them (0.25-0.35 s of a run's wall time, on one core): the OS takes the
    memory back at once. Exit functions still run (servers this process started are
    stopped there, logs flushed). Threads that only free models (``RELEASE_THREAD``)
    are left to the OS too.
    """
    import atexit
    import os
    import sys
    import threading

    from ocrflow.engines.embedded import RELEASE_THREAD

    here = threading.current_thread()
    for thread in threading.enumerate():
        if thread is not here and not thread.daemon and thread.name != RELEASE_THREAD:
            return
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: Python's own exit says 120
            code = code or 120
    os._exit(code)
