"""GLM-OCR: the SDK's request and decoding, and the parser on the outputs the authors
publish in their repository's examples (tests/data/recipes/glm-ocr)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ocrflow.errors import ParseError
from ocrflow.recipes.glm_ocr import SERVER_FLAGS, GlmOcrRecipe
from ocrflow.recipes.registry import recipe_for_model
from ocrflow.types import BlockLabel

from .helpers import page_image, reply, sample


def _regions(name: str) -> list[dict[str, Any]]:
    """The SDK's recognised regions of an example (one page)."""
    (page,) = json.loads(sample(f"glm-ocr/{name}.json"))
    return page


def test_request_is_image_then_text_recognition_greedy_as_the_sdk() -> None:
    recipe = recipe_for_model("zai-org/GLM-OCR")
    assert recipe.name == "glm-ocr"
    first = recipe.build_request(page_image(), 0)
    assert (first.prompt, first.image_first, first.temperature) == (
        "Text Recognition:",
        True,
        0.0,
    )
    assert first.max_tokens == 8192
    assert first.extra_body == {"top_p": 0.00001, "top_k": 1, "repetition_penalty": 1.1}
    retry = recipe.build_request(page_image(), 1)
    assert retry.temperature > 0 and "top_k" not in retry.extra_body
    assert recipe.server_flags == SERVER_FLAGS
    assert json.loads(SERVER_FLAGS[1]) == {"method": "mtp", "num_speculative_tokens": 3}
    assert GlmOcrRecipe(task="table").prompt == "Table Recognition:"
    with pytest.raises(ValueError, match="task"):
        GlmOcrRecipe(task="chart")


def test_whole_image_reply_keeps_every_line_of_the_seal() -> None:
    (region,) = _regions("seal")
    page = GlmOcrRecipe().parse(reply(sample("glm-ocr/seal.md")))
    assert page.markdown == region["content"]
    assert [b.text for b in page.blocks] == region["content"].split("\n\n")
    assert all(b.label is BlockLabel.TEXT and b.bbox is None for b in page.blocks)


def test_table_reply_is_one_html_table_block() -> None:
    (region,) = _regions("table")
    page = GlmOcrRecipe(task="table").parse(reply(sample("glm-ocr/table.md")))
    assert page.markdown == region["content"]
    (block,) = page.blocks
    assert block.label is BlockLabel.TABLE
    assert "<td>10,102,396.61</td>" in block.text


def test_page_regions_come_back_in_order_with_their_formulas() -> None:
    regions = _regions("page")
    page = GlmOcrRecipe().parse(reply(sample("glm-ocr/page.md")))
    # Every region the SDK recognised is in the page's Markdown, in reading order.
    cursor = 0
    for region in regions:
        found = page.markdown.find(region["content"].strip(), cursor)
        assert found >= 0, region["content"]
        cursor = found
    assert len(page.blocks) == len(regions)
    formula_at = [i for i, r in enumerate(regions) if r["label"] == "formula"]
    assert [i for i, b in enumerate(page.blocks) if b.label is BlockLabel.FORMULA] == formula_at
    assert page.blocks[0].label is BlockLabel.SECTION_HEADER
    assert page.blocks[0].text == "## 7.4 胶缝"


def test_formula_task_gives_one_display_formula() -> None:
    page = GlmOcrRecipe(task="formula").parse(reply("\\frac {q l}{t _ {2}} \\leqslant f _ {1}"))
    assert page.markdown == "$$\n\\frac {q l}{t _ {2}} \\leqslant f _ {1}\n$$"
    assert [b.label for b in page.blocks] == [BlockLabel.FORMULA]


def test_cut_off_reply_is_truncated() -> None:
    with pytest.raises(ParseError) as caught:
        GlmOcrRecipe().parse(reply(sample("glm-ocr/seal.md"), finish_reason="length"))
    assert caught.value.reason == "truncated"
