"""Chandra: HTML layout blocks into Markdown, furniture into attributes, images into figures."""

from __future__ import annotations

import pytest

from ocrflow.errors import ParseError
from ocrflow.recipes.chandra import LAYOUT_PROMPT, ChandraRecipe

from .helpers import page_image, reply, sample


@pytest.fixture
def layout() -> str:
    return sample("chandra_layout.html")


def test_layout_becomes_markdown(layout: str) -> None:
    page = ChandraRecipe().parse(reply(layout))
    assert page.markdown.split("\n\n") == [
        "# Water Quality Summary",
        "In 2023 the plant treated an average of **14.2 million litres** per day. Disinfection "
        "credit uses $CT = C \\times T_{10}$, where $T_{10}$ is the contact time.",
        "## Sampling schedule",
        "- Daily grab samples at the intake\n- Weekly samples at *three* distribution points\n"
        "    - north tower",
        "<table><tr><th>Contaminant</th><th>Level found</th><th>Limit</th></tr>"
        "<tr><td>Nitrate</td><td>2.1 mg/L</td><td>10 mg/L</td></tr>"
        '<tr><td colspan="3">No lead exceedances</td></tr></table>',
        "<!--figure:0-->",
        "Figure 1: Monthly turbidity at the intake.",
        "$$\n\\mathrm{NTU}_{d} = \\frac{1}{96} \\sum_{i=1}^{96} x_{i}\n$$",
        "☑ Report mailed to residents ☐ Public meeting held",
    ]


def test_headers_footers_and_alt_text_are_attributes(layout: str) -> None:
    page = ChandraRecipe().parse(reply(layout))
    assert page.attributes == {
        "page_header": ["Riverton Public Works — Annual Report 2023"],
        "page_footer": ["2"],
        "figure_alts": ["Line chart of monthly turbidity peaking in March"],
    }


def test_image_blocks_become_figures_on_the_1024_grid(layout: str) -> None:
    (figure,) = ChandraRecipe().parse(reply(layout)).figures
    assert figure.bbox == pytest.approx((120 / 1024, 580 / 1024, 900 / 1024, 820 / 1024), abs=1e-6)
    assert (figure.label, figure.placeholder) == ("image", "<!--figure:0-->")


def test_figure_without_box_keeps_its_text() -> None:
    html = '<div data-label="Figure"><img alt="logo"><p>Acme Water</p></div>'
    page = ChandraRecipe().parse(reply(html))
    assert (page.markdown, page.figures) == ("Acme Water", ())


def test_fenced_and_cut_off_html() -> None:
    html = '```html\n<div data-bbox="0 0 10 10" data-label="Text"><p>Partial para'
    assert ChandraRecipe().parse(reply(html)).markdown == "Partial para"


def test_blank_page() -> None:
    html = '<div data-bbox="0 0 1024 1024" data-label="Blank-Page"></div>'
    assert ChandraRecipe().parse(reply(html)).markdown == ""


def test_sampling_follows_chandra() -> None:
    recipe = ChandraRecipe()
    first, second = (recipe.build_request(page_image(), n) for n in (0, 1))
    assert (first.temperature, first.extra_body) == (0.0, {"top_p": 0.1})
    assert (second.temperature, second.extra_body) == (0.3, {"top_p": 0.95})
    assert first.image_first is True
    assert first.prompt == LAYOUT_PROMPT
    assert first.max_tokens == 12384


def test_prompt_names_the_grid_and_labels() -> None:
    assert LAYOUT_PROMPT.startswith("OCR this image to HTML, arranged as layout blocks.")
    assert "Bboxes are normalized 0-1024." in LAYOUT_PROMPT
    assert "- Page-Header\n- Page-Footer\n" in LAYOUT_PROMPT
    assert "Only use these tags ['math', 'br', 'i', 'b'," in LAYOUT_PROMPT


def test_content_failures(layout: str) -> None:
    with pytest.raises(ParseError) as caught:
        ChandraRecipe().parse(reply(layout, finish_reason="length"))
    assert caught.value.reason == "truncated"
    loop = '<div data-label="Text"><p>' + "the page " * 200 + "</p></div>"
    with pytest.raises(ParseError) as caught:
        ChandraRecipe().parse(reply(loop))
    assert caught.value.reason == "repetition"
