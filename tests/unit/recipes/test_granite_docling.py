"""The ``granite-docling`` recipe on a DocTags reply published by the docling team.

The expected labels and boxes are read straight off the DocTags text (``<loc_N>`` on the
0-500 grid), apart from docling-core, which the recipe uses to read it.
"""

from __future__ import annotations

import re

import pytest

from ocrflow.errors import ParseError
from ocrflow.recipes.granite_docling import PROMPT, STOP, GraniteDoclingRecipe, doctags_of
from ocrflow.recipes.registry import recipe_for_model
from ocrflow.types import BlockLabel, PageImage

from .helpers import reply, sample

DOCTAGS = sample("granite-docling/page_with_pic.dt")
_ELEMENT = re.compile(r"<(\w+)><loc_(\d+)><loc_(\d+)><loc_(\d+)><loc_(\d+)>")


def _tagged(tag: str) -> list[tuple[float, float, float, float]]:
    """Boxes of ``tag`` elements in the raw DocTags, as fractions of the page."""
    return [
        tuple(int(v) / 500 for v in m.groups()[1:])  # type: ignore[misc]
        for m in _ELEMENT.finditer(DOCTAGS)
        if m.group(1) == tag
    ]


def test_model_name_picks_the_recipe_with_docling_s_request() -> None:
    recipe = recipe_for_model("ibm-granite/granite-docling-258M")
    assert isinstance(recipe, GraniteDoclingRecipe)
    request = recipe.build_request(_image(), 0)
    assert request.prompt == PROMPT == "Convert this page to docling."
    assert request.image_first and request.temperature == 0.0 and request.max_tokens == 8192
    assert request.extra_body == {"stop": list(STOP), "skip_special_tokens": False}


def _image() -> PageImage:
    return PageImage(b"", 10, 10, "png")


def test_published_doctags_give_labels_boxes_and_text() -> None:
    page = GraniteDoclingRecipe().parse(reply(DOCTAGS))
    by_label: dict[BlockLabel, list] = {}
    for block in page.blocks:
        by_label.setdefault(block.label, []).append(block)
    headers = by_label[BlockLabel.PAGE_HEADER]
    assert [b.text for b in headers] == [
        "Optimized Table Tokenization for Table Structure Recognition",
        "7",
    ]
    for block, box in zip(headers, _tagged("page_header"), strict=True):
        assert block.bbox == pytest.approx(box, abs=0.01)
    (figure,) = by_label[BlockLabel.FIGURE]
    assert figure.bbox == pytest.approx(_tagged("picture")[0], abs=0.01)
    assert page.figures[0].bbox == pytest.approx(_tagged("picture")[0], abs=0.01)
    (caption,) = by_label[BlockLabel.CAPTION]
    assert caption.text.startswith("Fig. 3. OTSL description of table structure")
    assert caption.bbox == pytest.approx(_tagged("caption")[0], abs=0.01)
    (section,) = by_label[BlockLabel.SECTION_HEADER]
    assert section.text == "## 4.2 Language Syntax"
    assert section.bbox == pytest.approx(_tagged("section_header_level_1")[0], abs=0.01)
    texts = by_label[BlockLabel.TEXT]
    assert len(texts) == len(_tagged("text")) == 4
    for block, box in zip(texts, _tagged("text"), strict=True):
        assert block.bbox == pytest.approx(box, abs=0.01)
    assert len(by_label[BlockLabel.LIST_ITEM]) == 6
    assert by_label[BlockLabel.LIST_ITEM][2].text == "3. Cross cell rule:"


def test_markdown_is_docling_s_with_figure_placeholders() -> None:
    page = GraniteDoclingRecipe().parse(reply(DOCTAGS))
    assert "## 4.2 Language Syntax" in page.markdown
    assert page.markdown.count(page.figures[0].placeholder) == 1
    assert "- 1. Left-looking cell rule" in page.markdown
    # Page headers are docling's furniture: blocks, not Markdown.
    assert "Optimized Table Tokenization for Table Structure Recognition" not in page.markdown


def test_doctags_cut_by_the_stop_string_still_read() -> None:
    cut = DOCTAGS.split("</doctag>")[0].removeprefix("Assistant: ")
    assert doctags_of(cut).endswith("</doctag>")
    page = GraniteDoclingRecipe().parse(reply(cut))
    assert "## 4.2 Language Syntax" in page.markdown


def test_bad_replies_are_parse_errors() -> None:
    with pytest.raises(ParseError):
        GraniteDoclingRecipe().parse(reply(DOCTAGS, finish_reason="length"))
    with pytest.raises(ParseError):
        GraniteDoclingRecipe().parse(reply("<doctag></doctag>"))
