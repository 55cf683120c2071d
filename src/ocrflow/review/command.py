"""``ocrflow review OUT``: build the static review site of a run (see ``review.site``)."""

from __future__ import annotations

import os
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from ocrflow.errors import OcrflowError, OutputError
from ocrflow.review.select import DEFAULT_SEED, parse_only
from ocrflow.review.site import ReviewOptions, build_review

USAGE_ERROR = 2
OUTPUT_ERROR = 3


def review_command(
    output: Annotated[str, typer.Argument(help="An output directory (or URL) of a run.")],
    dest: Annotated[
        str | None,
        typer.Option("-o", "--output", help="Where to write the site (default: OUT/review)."),
    ] = None,
    only: Annotated[
        list[str] | None,
        typer.Option(
            "--only", help="Show only failed, partial or fallback documents (repeat or a,b)."
        ),
    ] = None,
    sample: Annotated[
        int | None, typer.Option(help="Show N documents picked reproducibly (see --seed).")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of --sample.")] = DEFAULT_SEED,
    workers: Annotated[
        int | None, typer.Option(help="Processes rendering page images (default: up to 4).")
    ] = None,
    quiet: Annotated[bool, typer.Option("-q", "--quiet", help="Print nothing.")] = False,
) -> None:
    """Write a static HTML site (opens from disk) to review a run: each page image beside its
    Markdown, with routes, retries, fallbacks and failures."""
    try:
        options = ReviewOptions(
            output=output,
            dest=dest,
            only=parse_only(only or ()),
            sample=sample,
            seed=seed,
            workers=workers or min(4, os.cpu_count() or 1),
        )
        stats = build_review(options)
    except OutputError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(OUTPUT_ERROR) from None
    except OcrflowError as exc:
        Console(stderr=True).print(f"[red]error:[/] {escape(str(exc))}", soft_wrap=True)
        raise typer.Exit(USAGE_ERROR) from None
    if not quiet:
        typer.echo(
            f"review of {stats.documents_shown} of {stats.documents_total} documents "
            f"({stats.images} page images, {stats.image_errors} not rendered): "
            f"{stats.index.as_uri()}"
        )
