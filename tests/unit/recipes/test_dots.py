"""dots.ocr: JSON layout cells into Markdown, pictures into figures."""

from __future__ import annotations

import pytest

from ocrflow.errors import ConfigError, ParseError
from ocrflow.recipes.dots import (
    IMAGE_TOKENS,
    LAYOUT_PROMPT,
    MOCR_FLAGS,
    DotsRecipe,
    display_math,
    dots_recipe,
)
from ocrflow.recipes.registry import recipe_for_model

from .helpers import page_image, reply, sample

SIZE = {"image_width": 1584, "image_height": 2048}


@pytest.fixture
def layout() -> str:
    return sample("dots_layout.json")


def test_layout_becomes_markdown_in_reading_order(layout: str) -> None:
    page = DotsRecipe().parse(reply(layout, **SIZE))
    assert page.markdown.split("\n\n") == [
        "# Seasonal Turbidity Patterns in a Small Upland Reservoir",
        "A. Moreau, K. Osei and L. Brandt",
        "## 1. Introduction",
        "Turbidity in surface water varies with rainfall, sediment load and algal growth. "
        "We report four years of daily readings ($n = 1461$) taken at the intake.",
        "- grab samples at 06:00 and 18:00,\n- continuous nephelometer readings every 15 min.",
        "$$\n\\mathrm{NTU}_{d} = \\frac{1}{96} \\sum_{i=1}^{96} x_{i}\n$$",
        "<!--figure:0-->",
        "Figure 1: Daily mean turbidity, 2019–2022.",
        "<table><thead><tr><th>Season</th><th>Mean NTU</th><th>Max NTU</th></tr></thead>"
        "<tbody><tr><td>Winter</td><td>3.2</td><td>18.4</td></tr>"
        "<tr><td>Summer</td><td>1.1</td><td>6.0</td></tr></tbody></table>",
        "¹ NTU: nephelometric turbidity units.",
    ]


def test_headers_and_footers_are_attributes(layout: str) -> None:
    page = DotsRecipe().parse(reply(layout, **SIZE))
    assert page.attributes == {
        "page_header": ["Journal of Applied Hydrology 12 (2023) 45–61"],
        "page_footer": ["45"],
    }


def test_picture_box_is_scaled_from_the_resized_image(layout: str) -> None:
    (figure,) = DotsRecipe().parse(reply(layout, **SIZE)).figures
    # 1584 x 2048 is seen by the model as 1596 x 2044 (smart resize, factor 28).
    assert figure.bbox == pytest.approx(
        (300 / 1596, 900 / 2044, 1200 / 1596, 1400 / 2044), abs=1e-6
    )
    assert (figure.label, figure.placeholder) == ("picture", "<!--figure:0-->")


def test_pictures_need_the_image_size(layout: str) -> None:
    with pytest.raises(ConfigError, match="image size"):
        DotsRecipe().parse(reply(layout))


def test_pages_without_pictures_need_no_size() -> None:
    text = '[{"bbox": [1, 2, 3, 4], "category": "Text", "text": "Hello"}]'
    assert DotsRecipe().parse(reply(text)).markdown == "Hello"


def test_fenced_json_and_single_cell() -> None:
    fenced = '```json\n{"bbox": [1, 2, 3, 4], "category": "Title", "text": "Report"}\n```'
    assert DotsRecipe().parse(reply(fenced)).markdown == "# Report"


@pytest.mark.parametrize(
    "text",
    [
        '[{"bbox": [1, 2, 3, 4], "category": "Text", "text": "cut',
        '{"layout": "none"}',
        '[{"bbox": [1, 2, 3, 4], "text": "no category"}]',
        '[{"category": "Picture", "bbox": [1, 2]}]',
        "Plain prose instead of JSON.",
    ],
)
def test_unusable_replies_are_parse_errors(text: str) -> None:
    with pytest.raises(ParseError):
        DotsRecipe().parse(reply(text, **SIZE))


def test_cut_off_reply_is_a_parse_error(layout: str) -> None:
    with pytest.raises(ParseError) as caught:
        DotsRecipe().parse(reply(layout, finish_reason="length", **SIZE))
    assert caught.value.reason == "truncated"


@pytest.mark.parametrize(
    ("latex", "expected"),
    [
        (r"\[ x^2 \]", "$$\nx^2\n$$"),
        ("$$x^2$$", "$$\nx^2\n$$"),
        ("x^2 + y^2", "$$\nx^2 + y^2\n$$"),
        ("  ", ""),
    ],
)
def test_display_math(latex: str, expected: str) -> None:
    assert display_math(latex) == expected


def test_request() -> None:
    request = DotsRecipe().build_request(page_image(), 1)
    assert request.image_first is True
    assert request.prompt == IMAGE_TOKENS + LAYOUT_PROMPT
    assert request.temperature == 0.2
    assert request.extra_body == {"top_p": 0.9}
    assert request.max_tokens == 16384
    assert "--trust-remote-code" in DotsRecipe().server_flags


def test_dots_mocr_adds_the_content_format_flag_and_nothing_else() -> None:
    mocr = recipe_for_model("rednote-hilab/dots.mocr")
    ocr = recipe_for_model("rednote-hilab/dots.ocr")
    assert (mocr.name, ocr.name) == ("dots", "dots")
    assert mocr.server_flags == MOCR_FLAGS
    flags = " ".join(mocr.server_flags)
    assert "--chat-template-content-format string" in flags
    assert "--chat-template-content-format" not in ocr.server_flags
    assert mocr.server_flags[: len(ocr.server_flags)] == ocr.server_flags
    # The authors' client sends dots.mocr exactly what it sent dots.ocr.
    for attempt in (0, 3):
        assert mocr.build_request(page_image(), attempt) == ocr.build_request(page_image(), attempt)


def test_dots_mocr_reads_the_same_layout(layout: str) -> None:
    mocr = recipe_for_model("rednote-hilab/dots.mocr")
    assert mocr.parse(reply(layout, **SIZE)) == DotsRecipe().parse(reply(layout, **SIZE))


def test_an_explicit_option_still_wins_over_the_model_defaults() -> None:
    recipe = dots_recipe("rednote-hilab/dots.mocr", server_flags=("--x",), top_p=0.5)
    assert recipe.server_flags == ("--x",)
    assert recipe.build_request(page_image(), 0).extra_body == {"top_p": 0.5}
