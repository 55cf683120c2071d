"""Chandra: HTML layout blocks into Markdown, furniture into attributes, images into figures."""

from __future__ import annotations

import json

import pytest

from ocrflow.errors import ParseError
from ocrflow.recipes import chandra2
from ocrflow.recipes.chandra import LAYOUT_PROMPT, ChandraRecipe
from ocrflow.recipes.registry import recipe_for_model
from ocrflow.types import BlockLabel

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


CHANDRA2 = "datalab-to/chandra-ocr-2"
#: A Chandra 2 reply in the format its prompt asks for (boxes ``x0 y0 x1 y1`` on 0-1000,
#: the new labels), written for this test: no published raw reply was found.
CHANDRA2_REPLY = """\
<div data-bbox="80 40 920 70" data-label="Page-Header"><p>Journal of Applied Chemistry</p></div>
<div data-bbox="80 90 920 130" data-label="Section-Header"><h2>Ester Synthesis</h2></div>
<div data-bbox="80 150 920 300" data-label="Text"><p>Acetic acid reacts with ethanol.</p></div>
<div data-bbox="200 320 800 380" data-label="Chemical-Block">
<p><chem>CC(=O)O.OCC>>CC(=O)OCC</chem></p></div>
<div data-bbox="150 400 850 700" data-label="Diagram"><pre>graph TD
A[Acid] --> C[Ester]</pre></div>
<div data-bbox="100 705 500 715" data-label="Image"><img alt="Flask on a stand"/></div>
<div data-bbox="80 720 920 900" data-label="Bibliography">
<ol><li>Fischer, E. (1895).</li></ol></div>
"""


def test_chandra2_settings_follow_its_client() -> None:
    recipe = recipe_for_model(CHANDRA2)
    assert recipe.name == "chandra" and recipe.prompt == chandra2.LAYOUT_PROMPT
    requests = [recipe.build_request(page_image(), n) for n in range(7)]
    # generate_vllm: greedy with top_p 0.1, then min(0.2 * (retry + 1), 0.8) with 0.95.
    assert [r.temperature for r in requests] == [0.0, 0.2, 0.4, 0.6, 0.8, 0.8, 0.8]
    assert [r.extra_body["top_p"] for r in requests] == [0.1] + [0.95] * 6
    assert {r.max_tokens for r in requests} == {12384}
    flags = recipe.server_flags
    assert flags[flags.index("--max-model-len") + 1] == "18000"
    kwargs = json.loads(flags[flags.index("--mm-processor-kwargs") + 1])
    assert kwargs == {"min_pixels": 3136, "max_pixels": 6291456}
    # Chandra 1 keeps its own.
    old = recipe_for_model("datalab-to/chandra")
    assert old == ChandraRecipe(model="datalab-to/chandra") and old.prompt == LAYOUT_PROMPT


def test_chandra2_prompt_names_its_grid_and_new_labels() -> None:
    prompt = chandra2.LAYOUT_PROMPT
    assert "in x0 y0 x1 y1 format.  Bboxes are normalized 0-1000." in prompt
    labels = "- Figure\n- Chemical-Block\n- Diagram\n- Bibliography\n- Blank-Page\n\n"
    assert labels in prompt
    assert "'code', 'chem']" in prompt and "'data-bbox', 'data-label']" in prompt
    assert "convert diagrams to mermaid" in prompt and "reactive SMILES" in prompt


@pytest.mark.parametrize(
    ("model", "two"),
    [
        (CHANDRA2, True),
        ("chandra-2", True),
        ("/models/Chandra-OCR-2", True),
        ("datalab-to/chandra", False),
        ("chandra-ocr-2.5-preview", False),
    ],
)
def test_chandra2_is_told_by_the_model_id(model: str, two: bool) -> None:
    assert chandra2.is_chandra2(model) is two


def test_chandra2_new_labels_map_onto_ours_on_the_1000_grid() -> None:
    page = recipe_for_model(CHANDRA2).parse(reply(CHANDRA2_REPLY))
    got = [(b.label, b.source_label, b.bbox) for b in page.blocks]
    assert got == [
        (BlockLabel.PAGE_HEADER, "Page-Header", (0.08, 0.04, 0.92, 0.07)),
        (BlockLabel.SECTION_HEADER, "Section-Header", (0.08, 0.09, 0.92, 0.13)),
        (BlockLabel.TEXT, "Text", (0.08, 0.15, 0.92, 0.3)),
        (BlockLabel.FORMULA, "Chemical-Block", (0.2, 0.32, 0.8, 0.38)),
        (BlockLabel.FIGURE, "Diagram", (0.15, 0.4, 0.85, 0.7)),
        (BlockLabel.FIGURE, "Image", (0.1, 0.705, 0.5, 0.715)),
        (BlockLabel.TEXT, "Bibliography", (0.08, 0.72, 0.92, 0.9)),
    ]
    smiles, diagram, bibliography = (page.blocks[i].text for i in (3, 4, 6))
    assert smiles == "CC(=O)O.OCC>>CC(=O)OCC"
    assert "A[Acid] --> C[Ester]" in diagram, "a diagram keeps its Mermaid"
    assert bibliography == "1. Fischer, E. (1895)."
    # Only Image and Figure blocks are cropped, as chandra's output.py does.
    (figure,) = page.figures
    assert figure.bbox == pytest.approx((0.1, 0.705, 0.5, 0.715))
    assert "Journal of Applied" not in page.markdown and smiles in page.markdown


def test_chandra2_blank_page_is_dropped() -> None:
    html = '<div data-bbox="0 0 1000 1000" data-label="Blank-Page"></div>'
    page = recipe_for_model(CHANDRA2).parse(reply(html))
    assert (page.markdown, page.blocks) == ("", ())
