"""Exit codes of the ``ocrflow`` commands and the one-line messages that go with them: an
error of ours becomes an exit code and a line on stderr, never a traceback."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.markup import escape

from ocrflow.errors import EngineFailing, OcrflowError, OutputError, first_error
from ocrflow.inputs.skips import Skipped
from ocrflow.storage.names import shown

USAGE_ERROR = 2
OUTPUT_ERROR = 3
ENGINE_FAILING = 4
NOTHING_TO_CONVERT = 5


def fail(message: str) -> typer.Exit:
    """Exit 2 (a usage or set-up error) with ``message`` on stderr."""
    # One unwrapped line: scripts grep it, and a path must not be cut in two.
    Console(stderr=True).print(
        f"[red]error:[/] {escape(shown(message))}", highlight=False, soft_wrap=True
    )
    return typer.Exit(USAGE_ERROR)


def output_failure(exc: Exception) -> typer.Exit:
    """Exit 3 with one line naming the OUT path that could not be written (disk full,
    read-only, no permission): no traceback, finished documents stay, the next run resumes.
    ``exc`` may be a task group's errors: one of ours without an output error exits 2."""
    failing = first_error(exc, EngineFailing)
    if failing is not None:
        return engine_failure(failing)
    error = first_error(exc, OutputError)
    if error is None:
        ours = first_error(exc, OcrflowError)
        if ours is None:
            raise exc  # a bug: keep its traceback
        return fail(str(ours))
    # Plain echo, not rich: rich would wrap a long path onto several lines.
    typer.echo(f"error: {error}", err=True)
    return typer.Exit(OUTPUT_ERROR)


def engine_failure(error: EngineFailing) -> typer.Exit:
    """Exit 4 with the servers and their causes: every server failed for ``--fail-after``;
    unfinished pages stay pending for the next run."""
    typer.echo(f"error: {error}", err=True)
    return typer.Exit(ENGINE_FAILING)


def nothing_to_convert(skipped: Skipped, *, as_json: bool) -> typer.Exit:
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
