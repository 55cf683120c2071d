"""Generic Markdown VLMs: family defaults, fences, HTML tables, page furniture."""

from __future__ import annotations

import pytest

from ocrflow.errors import ParseError
from ocrflow.recipes.markdown import (
    GENERIC_PROMPT,
    NANONETS_PROMPT,
    MarkdownRecipe,
    family_defaults,
    markdown_recipe,
)

from .helpers import page_image, reply, sample


def test_nanonets_reply() -> None:
    recipe = markdown_recipe("nanonets/Nanonets-OCR2-3B")
    page = recipe.parse(reply(sample("markdown_nanonets.md")))
    assert page.attributes == {"watermark": ["DRAFT"], "page_number": ["2/14"]}
    assert page.markdown.startswith("# Annual Water Quality Report 2023\n\n")
    assert "<table>\n<tr><th>Contaminant</th><th>Level found</th></tr>" in page.markdown
    assert "$CT = C \\times T_{10}$" in page.markdown
    assert "☑ Report mailed ☐ Public meeting" in page.markdown
    assert "<page_number>" not in page.markdown and "<watermark>" not in page.markdown


def test_fenced_reply_is_unwrapped() -> None:
    page = markdown_recipe("lightonai/LightOnOCR-2-1B").parse(reply(sample("markdown_lighton.md")))
    assert page.markdown.startswith("## 2. Methods\n\n")
    assert "```" not in page.markdown
    assert "| Season | Mean NTU |\n| --- | --- |\n| Winter | 3.2 |" in page.markdown
    assert page.markdown.endswith(
        "$$\n\\mathrm{NTU}_{d} = \\frac{1}{96} \\sum_{i=1}^{96} x_{i}\n$$"
    )


def test_html_tables_to_markdown_on_request() -> None:
    page = MarkdownRecipe(table_format="markdown").parse(reply(sample("markdown_nanonets.md")))
    assert "| Contaminant | Level found |\n| --- | --- |\n| Nitrate | 2.1 mg/L |" in page.markdown


def test_meta_tokens_are_stripped() -> None:
    assert MarkdownRecipe().parse(reply("# Title<|im_end|>")).markdown == "# Title"


@pytest.mark.parametrize(
    ("model", "prompt", "target_dim", "max_tokens"),
    [
        ("lightonai/LightOnOCR-2-1B", None, 1540, 4096),
        ("nanonets/Nanonets-OCR2-3B", NANONETS_PROMPT, 1540, 15000),
        ("Qwen/Qwen3-VL-8B-Instruct", GENERIC_PROMPT, 1280, 8192),
        ("Qwen/Qwen2.5-VL-7B-Instruct", GENERIC_PROMPT, 1288, 8192),
        ("some/unknown-vlm", GENERIC_PROMPT, 1288, 8192),
    ],
)
def test_family_defaults(model: str, prompt: str | None, target_dim: int, max_tokens: int) -> None:
    recipe = markdown_recipe(model)
    assert (recipe.prompt, recipe.target_dim, recipe.max_tokens) == (prompt, target_dim, max_tokens)
    assert recipe.model == model
    assert recipe.name == "markdown"


def test_lighton_sends_the_image_alone_with_top_p() -> None:
    request = markdown_recipe("lightonai/LightOnOCR-2-1B").build_request(page_image(), 0)
    assert request.prompt is None
    assert request.image_first is True
    assert request.temperature == 0.2
    assert request.extra_body == {"top_p": 0.9}


def test_options_override_family_defaults() -> None:
    recipe = markdown_recipe("lightonai/LightOnOCR-2-1B", prompt="Read it.", target_dim=1024)
    assert (recipe.prompt, recipe.target_dim, recipe.top_p) == ("Read it.", 1024, 0.9)
    assert family_defaults("LIGHTONOCR-2") == family_defaults("lightonocr")


def test_generic_request() -> None:
    request = MarkdownRecipe().build_request(page_image(), 2, max_tokens=1000, page_key="k")
    assert (request.prompt, request.image_first, request.temperature) == (GENERIC_PROMPT, True, 0.2)
    assert (request.max_tokens, request.page_key, request.extra_body) == (1000, "k", {})


def test_content_failures() -> None:
    with pytest.raises(ParseError) as caught:
        MarkdownRecipe().parse(reply("# Title\n\nText", finish_reason="length"))
    assert caught.value.reason == "truncated"
    with pytest.raises(ParseError) as caught:
        MarkdownRecipe().parse(reply("the " * 300))
    assert caught.value.reason == "repetition"
    with pytest.raises(ParseError):
        MarkdownRecipe().parse(reply("Text", finish_reason="abort"))
