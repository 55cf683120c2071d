"""``ocrflow recipes``: what each recipe asks its model and what it gives back.

Everything comes from the recipe registry (``recipes.registry``): each recipe is built for
its card's first model and described by ``recipes.cards.describe``, so a new recipe shows
up here without a change to this module.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from ocrflow.observe.logs import Quiet, Verbose, configure_logging, verbosity
from ocrflow.recipes.cards import describe
from ocrflow.recipes.registry import CARDS, RECIPES, recipe_for_model


def recipe_rows() -> list[dict[str, Any]]:
    """One description per registered recipe, in registry order."""
    rows = []
    for name in RECIPES:
        card = CARDS[name]
        rows.append(describe(name, recipe_for_model(card.models[0], name), card))
    return rows


def recipes_command(
    as_json: Annotated[
        bool, typer.Option("--json", help="Print a JSON list instead of a table.")
    ] = False,
    verbose: Verbose = False,
    quiet: Quiet = False,
) -> None:
    """List the recipes: models, prompt, image size, sampling, vLLM flags, boxes, licence."""
    configure_logging(verbosity(verbose, quiet))
    rows = recipe_rows()
    if as_json:
        typer.echo(json.dumps(rows, indent=2, ensure_ascii=False))
        return
    table = Table(show_lines=True)
    for column in ("recipe", "models", "prompt", "image", "sampling", "vLLM flags", "boxes"):
        table.add_column(column, overflow="fold")
    table.add_column("licence")
    for row in rows:
        sampling = ", ".join(f"{key} {_value(value)}" for key, value in row["sampling"].items())
        table.add_row(
            row["name"],
            "\n".join(row["models"]),
            row["prompt"],
            f"{row['image_size']} px",
            sampling,
            " ".join(row["vllm_flags"]),
            "yes" if row["boxes"] else "no",
            row["licence"],
        )
    Console(width=200).print(table)


def _value(value: object) -> str:
    """A sampling value as the table shows it (a ladder of temperatures joined by /)."""
    if isinstance(value, list):
        return "/".join(str(v) for v in value)
    return str(value)
