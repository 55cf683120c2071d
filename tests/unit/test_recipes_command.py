"""``ocrflow recipes``: every registered recipe with its models, prompt, image size,
sampling, vLLM flags, boxes and licence, as a table and as JSON."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from ocrflow.cli import app
from ocrflow.recipes.registry import CARDS, RECIPES, recipe_for_model

REQUIRED = {
    "olmocr",
    "deepseek",
    "markdown",
    "dots",
    "chandra",
    "lightonocr",
    "paddleocr-vl",
    "glm-ocr",
}


def _json_rows() -> list[dict]:
    done = CliRunner().invoke(app, ["recipes", "--json"])
    assert done.exit_code == 0, done.output
    return json.loads(done.output)


def test_json_lists_every_recipe_with_its_card() -> None:
    rows = _json_rows()
    names = [row["name"] for row in rows]
    assert names == list(RECIPES) and set(names) >= REQUIRED
    assert set(CARDS) == set(RECIPES)  # a recipe without a card would break the command
    for row in rows:
        assert set(row) == {
            "name",
            "models",
            "prompt",
            "image_size",
            "sampling",
            "vllm_flags",
            "boxes",
            "licence",
            "notes",
        }
        assert row["models"] and all("/" in model for model in row["models"]), row
        assert isinstance(row["image_size"], int) and row["image_size"] >= 512
        assert row["sampling"]["temperatures"] and row["sampling"]["max_tokens"] > 0
        assert row["licence"]
        # The row describes the recipe its first model gets by name alone.
        recipe = recipe_for_model(row["models"][0])
        assert recipe.name == row["name"], row["models"][0]
        assert row["image_size"] == recipe.target_dim
        assert row["vllm_flags"] == list(recipe.server_flags)


def test_json_values_of_the_new_recipes() -> None:
    rows = {row["name"]: row for row in _json_rows()}
    lighton = rows["lightonocr"]
    assert lighton["models"][0] == "lightonai/LightOnOCR-2-1B"
    assert (lighton["prompt"], lighton["image_size"]) == ("(image only)", 1540)
    assert lighton["sampling"]["top_p"] == 0.9 and lighton["sampling"]["temperatures"][0] == 0.2
    assert "chat_template_kwargs" not in lighton["sampling"]  # nested options are not sampling
    glm = rows["glm-ocr"]
    assert glm["prompt"] == "Text Recognition:" and glm["licence"] == "MIT"
    assert glm["vllm_flags"][0] == "--speculative-config"
    assert glm["sampling"] | {"top_k": 1} == glm["sampling"]
    paddle = rows["paddleocr-vl"]
    assert paddle["prompt"] == "OCR:" and paddle["licence"] == "Apache-2.0"
    assert [rows[n]["boxes"] for n in ("deepseek", "dots", "chandra", "glm-ocr")] == [
        True,
        True,
        True,
        False,
    ]
    # Long prompts are cut to their first words.
    assert rows["olmocr"]["prompt"].endswith(" ...")
    assert len(rows["olmocr"]["prompt"].split()) == 9


def test_table_names_each_recipe_and_its_licence() -> None:
    done = CliRunner().invoke(app, ["recipes"])
    assert done.exit_code == 0, done.output
    for name in REQUIRED:
        assert name in done.output
    assert "Apache-2.0" in done.output and "--speculative-config" in done.output


def test_json_rows_of_the_new_model_generations() -> None:
    rows = {row["name"]: row for row in _json_rows()}
    dots = rows["dots"]
    assert dots["models"] == ["rednote-hilab/dots.mocr", "rednote-hilab/dots.ocr"]
    flags = " ".join(dots["vllm_flags"])
    assert "--chat-template-content-format string" in flags and "--trust-remote-code" in flags
    deepseek = rows["deepseek"]
    assert deepseek["models"][0] == "deepseek-ai/DeepSeek-OCR-2"
    assert (deepseek["image_size"], deepseek["sampling"]["max_tokens"]) == (1584, 8192)
    assert deepseek["licence"].startswith("Apache-2.0") and "MIT" in deepseek["licence"]
    assert "--logits_processors" in deepseek["vllm_flags"]
    chandra = rows["chandra"]
    assert chandra["models"] == ["datalab-to/chandra-ocr-2", "datalab-to/chandra"]
    assert chandra["sampling"]["temperatures"] == [0.0, 0.2, 0.4, 0.6, 0.8, 0.8, 0.8]
    assert chandra["vllm_flags"][:2] == ["--max-model-len", "18000"]
    assert "--mm-processor-kwargs" in chandra["vllm_flags"]
    assert chandra["prompt"].startswith("OCR this image to HTML")
    assert "OpenRAIL-M" in chandra["licence"]


def test_older_generations_keep_their_own_flags() -> None:
    # A row describes its first model; the older ones keep their authors' servers.
    assert (
        "--chat-template-content-format"
        not in recipe_for_model("rednote-hilab/dots.ocr").server_flags
    )
    assert recipe_for_model("datalab-to/chandra").server_flags[:2] == (
        "--max-model-len",
        "32768",
    )
