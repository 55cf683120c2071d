"""Which recipe reads which model. Adding a model family: one module, its line in ``RECIPES``
and ``CARDS`` below (and a name pattern when its model names say it)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from ocrflow.errors import ConfigError
from ocrflow.recipes import glm_ocr, granite_docling, lightonocr, mineru, paddleocr_vl
from ocrflow.recipes.base import Recipe
from ocrflow.recipes.cards import (
    CHANDRA_CARD,
    DEEPSEEK_CARD,
    DOTS_CARD,
    MARKDOWN_CARD,
    OLMOCR_CARD,
    RecipeCard,
)
from ocrflow.recipes.chandra import chandra_recipe
from ocrflow.recipes.deepseek import deepseek_recipe
from ocrflow.recipes.dots import dots_recipe
from ocrflow.recipes.markdown import markdown_recipe
from ocrflow.recipes.olmocr import OlmocrRecipe

#: Recipe name → factory; every factory takes ``model=`` plus the recipe's own options.
RECIPES: Mapping[str, Callable[..., Recipe]] = MappingProxyType(
    {
        "olmocr": OlmocrRecipe,
        "deepseek": deepseek_recipe,
        "dots": dots_recipe,
        "chandra": chandra_recipe,
        "markdown": markdown_recipe,
        "lightonocr": lightonocr.lightonocr_recipe,
        "paddleocr-vl": paddleocr_vl.PaddleocrVlRecipe,
        "glm-ocr": glm_ocr.GlmOcrRecipe,
        "mineru": mineru.MineruRecipe,
        "granite-docling": granite_docling.GraniteDoclingRecipe,
    }
)

#: What ``ocrflow recipes`` says of each recipe beyond its request data (one per recipe).
CARDS: Mapping[str, RecipeCard] = MappingProxyType(
    {
        "olmocr": OLMOCR_CARD,
        "deepseek": DEEPSEEK_CARD,
        "dots": DOTS_CARD,
        "chandra": CHANDRA_CARD,
        "markdown": MARKDOWN_CARD,
        "lightonocr": lightonocr.CARD,
        "paddleocr-vl": paddleocr_vl.CARD,
        "glm-ocr": glm_ocr.CARD,
        "mineru": mineru.CARD,
        "granite-docling": granite_docling.CARD,
    }
)

#: Model-name patterns (searched case-insensitively), first match wins; else "markdown".
MODEL_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"olmocr", "olmocr"),
    (r"deepseek[-_.]?ocr", "deepseek"),
    (r"dots[-_.]?m?ocr", "dots"),
    (r"chandra", "chandra"),
    (r"lightonocr", "lightonocr"),
    (r"paddleocr[-_.]?vl", "paddleocr-vl"),
    (r"glm[-_.]?ocr", "glm-ocr"),
    (r"mineru", "mineru"),
    (r"granite[-_.]?docling|smoldocling", "granite-docling"),
)
DEFAULT_RECIPE = "markdown"


def recipe_name_for_model(model_name: str) -> str:
    """The recipe a model name implies ("markdown" when none is recognised)."""
    for pattern, name in MODEL_PATTERNS:
        if re.search(pattern, model_name, re.IGNORECASE):
            return name
    return DEFAULT_RECIPE


def recipe_for_model(model_name: str, recipe: str | None = None, **options: Any) -> Recipe:
    """The recipe for ``model_name``: ``recipe`` when given, else the one its name implies.

    ``options`` override the recipe's defaults (``target_dim``, ``guided``, ``mode``, ...).
    ``guided=False`` is every recipe's default and is dropped, so a run configuration may
    always pass it; ``guided=True`` for a recipe without guided decoding is refused.
    Raises ``ConfigError`` for an unknown recipe name or option.
    """
    name = recipe or recipe_name_for_model(model_name)
    if name not in RECIPES:
        valid = ", ".join(sorted(RECIPES))
        raise ConfigError(f"unknown recipe {name!r}; valid recipes: {valid}")
    if options.get("guided") is False:
        del options["guided"]
    try:
        return RECIPES[name](model=model_name, **options)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"bad option for recipe {name!r}: {exc}") from exc
