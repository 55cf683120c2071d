"""The recipe registry: names, model-name patterns, options, errors."""

from __future__ import annotations

import pytest

from ocrflow.errors import ConfigError
from ocrflow.recipes.registry import RECIPES, recipe_for_model, recipe_name_for_model

from .helpers import page_image


@pytest.mark.parametrize(
    ("model", "name"),
    [
        ("allenai/olmOCR-2-7B-1025-FP8", "olmocr"),
        ("allenai/olmOCR-7B-0825", "olmocr"),
        ("deepseek-ai/DeepSeek-OCR", "deepseek"),
        ("/models/deepseek_ocr", "deepseek"),
        ("rednote-hilab/dots.ocr", "dots"),
        ("rednote-hilab/dots.mocr", "dots"),
        ("datalab-to/chandra", "chandra"),
        ("datalab-to/chandra-ocr-2", "chandra"),
        ("deepseek-ai/DeepSeek-OCR-2", "deepseek"),
        ("lightonai/LightOnOCR-2-1B", "lightonocr"),
        ("PaddlePaddle/PaddleOCR-VL-1.5", "paddleocr-vl"),
        ("zai-org/GLM-OCR", "glm-ocr"),
        ("nanonets/Nanonets-OCR2-3B", "markdown"),
        ("Qwen/Qwen2.5-VL-7B-Instruct", "markdown"),
        ("deepseek-ai/DeepSeek-V3", "markdown"),
        ("", "markdown"),
    ],
)
def test_recipe_follows_model_name(model: str, name: str) -> None:
    assert recipe_name_for_model(model) == name
    assert recipe_for_model(model).name == name


def test_explicit_recipe_wins() -> None:
    recipe = recipe_for_model("my-finetune", "olmocr")
    assert (recipe.name, recipe.target_dim) == ("olmocr", 1288)


def test_options_reach_the_recipe() -> None:
    recipe = recipe_for_model("allenai/olmOCR-2-7B-1025-FP8", guided=True, target_dim=1024)
    assert recipe.target_dim == 1024
    assert "structured_outputs" in recipe.build_request(page_image(), 0).extra_body
    assert recipe_for_model("lightonai/LightOnOCR-2-1B").target_dim == 1540


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_guided_off_is_accepted_by_every_recipe(name: str) -> None:
    assert recipe_for_model("m", name, guided=False).name == name


def test_guided_on_needs_a_recipe_with_guided_decoding() -> None:
    assert recipe_for_model("allenai/olmOCR-2-7B-1025-FP8", guided=True).name == "olmocr"
    with pytest.raises(ConfigError, match="deepseek"):
        recipe_for_model("deepseek-ai/DeepSeek-OCR", guided=True)


def test_unknown_recipe_lists_the_valid_ones() -> None:
    valid = (
        "chandra, deepseek, dots, glm-ocr, granite-docling, lightonocr, markdown, mineru, "
        "olmocr, paddleocr-vl"
    )
    with pytest.raises(ConfigError, match=valid):
        recipe_for_model("x", "tesseract")


@pytest.mark.parametrize(
    ("recipe", "options"),
    [
        ("olmocr", {"guided_regex": True}),
        ("deepseek", {"mode": "gundam"}),
        ("dots", {"table_format": "csv"}),
    ],
)
def test_bad_options_are_config_errors(recipe: str, options: dict[str, object]) -> None:
    with pytest.raises(ConfigError, match=recipe):
        recipe_for_model("x", recipe, **options)


def test_registry_is_read_only() -> None:
    with pytest.raises(TypeError):
        RECIPES["new"] = RECIPES["olmocr"]  # type: ignore[index]


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_every_recipe_honours_the_protocol(name: str) -> None:
    recipe = recipe_for_model("some-model", name)
    assert recipe.name == name
    assert recipe.target_dim > 0 and recipe.max_tokens > 0
    assert recipe.temperatures and all(t >= 0 for t in recipe.temperatures)
    assert all(isinstance(flag, str) for flag in recipe.server_flags)
    request = recipe.build_request(page_image(), len(recipe.temperatures) + 3, page_key="p")
    assert request.temperature == recipe.temperatures[-1]
    assert request.page_key == "p"
    with pytest.raises(AttributeError):
        recipe.target_dim = 1  # type: ignore[misc]
