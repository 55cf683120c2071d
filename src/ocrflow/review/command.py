"""``ocrflow review OUT``: build the static review site of a run (see ``review.site``)."""

from __future__ import annotations

import heapq
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from ocrflow.config.machine import usable_cpus
from ocrflow.errors import OcrflowError, OutputError
from ocrflow.observe.confidence_spread import ScoredPage, scored_pages
from ocrflow.observe.logs import Quiet, Verbose, configure_logging, verbosity
from ocrflow.review.select import (
    DEFAULT_SEED,
    LOW_CONFIDENCE,
    confidence_bar,
    low_confidence_filter,
    parse_only,
)
from ocrflow.review.site import ReviewOptions, build_review
from ocrflow.sinks.results import done_markers
from ocrflow.storage.open import open_store

USAGE_ERROR = 2
OUTPUT_ERROR = 3
#: Pages listed on the terminal by ``--only low-confidence`` (the site shows them all).
LISTED_PAGES = 20


def review_command(
    output: Annotated[str, typer.Argument(help="An output directory (or URL) of a run.")],
    dest: Annotated[
        str | None,
        typer.Option("-o", "--output", help="Where to write the site (default: OUT/review)."),
    ] = None,
    only: Annotated[
        list[str] | None,
        typer.Option(
            "--only",
            help="Show only failed, partial, fallback or low-confidence documents (repeat or "
            "a,b); low-confidence lists the worst first.",
        ),
    ] = None,
    below: Annotated[
        float | None,
        typer.Option(help="With --only low-confidence: pages under this confidence (default 0.8)."),
    ] = None,
    sample: Annotated[
        int | None, typer.Option(help="Show N documents picked reproducibly (see --seed).")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of --sample.")] = DEFAULT_SEED,
    workers: Annotated[
        int | None, typer.Option(help="Processes rendering page images (default: up to 4).")
    ] = None,
    verbose: Verbose = False,
    quiet: Quiet = False,
) -> None:
    """Write a static HTML site (opens from disk) to review a run: each page image beside its
    Markdown, with routes, retries, fallbacks and failures (-q: print nothing but errors)."""
    configure_logging(verbosity(verbose, quiet))
    try:
        options = ReviewOptions(
            output=output,
            dest=dest,
            only=_with_bar(parse_only(only or ()), below),
            sample=sample,
            seed=seed,
            workers=workers or min(4, usable_cpus()),
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
        bar = confidence_bar(options.only)
        if bar is not None:
            _list_worst(output, bar)


def _with_bar(only: tuple[str, ...], below: float | None) -> tuple[str, ...]:
    """``--only`` with ``--below X`` folded into its low-confidence filter (``--below``
    alone asks for that filter)."""
    if below is None:
        return only
    rest = tuple(v for v in only if v.partition("<")[0] != LOW_CONFIDENCE)
    return (*rest, low_confidence_filter(below))


def worst_pages(output: str, below: float, limit: int = LISTED_PAGES) -> list[ScoredPage]:
    """The ``limit`` pages of the run at ``output`` with the lowest confidence under
    ``below``, worst first (done markers only: no text is read)."""
    pages = (
        page
        for record in done_markers(open_store(output))
        for page in scored_pages(record)
        if page.confidence is not None and page.confidence < below
    )
    return heapq.nsmallest(limit, pages, key=lambda p: (p.confidence, p.source, p.page))


def _list_worst(output: str, below: float) -> None:
    pages = worst_pages(output, below)
    typer.echo(f"pages under confidence {below:g}, worst first ({len(pages)} shown):")
    for page in pages:
        typer.echo(f"  {page.confidence:.3f}  {page.source}  page {page.page}")
