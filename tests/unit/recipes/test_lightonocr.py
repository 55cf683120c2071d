"""LightOnOCR: the image alone (plain), or grounding blocks parsed as the authors' client
parses them, on the output their README publishes (tests/data/recipes/lightonocr)."""

from __future__ import annotations

import pytest

from ocrflow.errors import ConfigError, ParseError
from ocrflow.recipes.lightonocr import (
    BASE_FLAGS,
    LightonocrRecipe,
    generation,
    lightonocr_recipe,
    split_grounded,
)
from ocrflow.recipes.registry import recipe_for_model
from ocrflow.types import BlockLabel

from .helpers import page_image, reply, sample

GROUNDED = "lightonocr/grounding_readme.txt"
#: What ``parse_blocks`` of lightonocr/grounding.py gives on that output: label, 0-1000
#: box, text (``to_pixels`` on a 1000 x 1000 image is the box itself).
DIAGRAM = "Model architecture diagram showing NaViT, Projection, Embedding, ..."
FIRST = "The first version of LightOnOCR [13], established the core architecture ..."
AUTHORS_BLOCKS = [
    ("image", (309, 90, 691, 516), DIAGRAM),
    ("caption", (400, 555, 591, 566), "Figure 1: Model architecture."),
    ("title", (113, 608, 263, 623), "## 2.2 LightOnOCR-1"),
    ("text", (112, 640, 882, 698), FIRST),
    ("page_number", (491, 935, 505, 950), "3"),
]


def test_lightonocr_2_sends_the_image_alone_at_1540_with_top_p_09() -> None:
    recipe = recipe_for_model("lightonai/LightOnOCR-2-1B")
    assert recipe.name == "lightonocr" and recipe.target_dim == 1540
    request = recipe.build_request(page_image(), 0)
    assert request.prompt is None
    assert request.temperature == 0.2
    assert request.extra_body == {"top_p": 0.9, "chat_template_kwargs": {"enable_thinking": False}}
    assert recipe.server_flags == BASE_FLAGS


def test_lightonocr_3_sizes_flags_and_grounding_prompt() -> None:
    small = lightonocr_recipe("lightonai/LightOnOCR-3-0.8B", mode="grounding")
    assert (small.target_dim, small.top_p, small.prompt) == (2048, 1.0, "grounding")
    assert small.server_flags == (
        *BASE_FLAGS,
        "--max-model-len",
        "18000",
        "--default-chat-template-kwargs",
        '{"enable_thinking": false}',
    )
    one_b = lightonocr_recipe("lightonai/LightOnOCR-3-1B")
    assert one_b.target_dim == 1540
    assert one_b.server_flags == (*BASE_FLAGS, "--max-model-len", "16384")
    assert [generation(m) for m in ("LightOnOCR-1B-1025", "x/LightOnOCR-2-1B", "custom")] == [
        1,
        2,
        None,
    ]


def test_grounding_is_refused_for_generations_without_it() -> None:
    with pytest.raises(ConfigError, match="no grounding mode"):
        recipe_for_model("lightonai/LightOnOCR-2-1B", mode="grounding")
    with pytest.raises(ConfigError, match="bad option"):
        recipe_for_model("lightonai/LightOnOCR-3-1B", mode="layout")


def test_markers_split_as_the_authors_parser_splits_them() -> None:
    found = split_grounded(sample(GROUNDED))
    assert [(label, text) for label, _, _, text in found] == [
        (label, text) for label, _, text in AUTHORS_BLOCKS
    ]
    for (_, continues, box, _), (_, authors_box, _) in zip(found, AUTHORS_BLOCKS, strict=True):
        assert not continues
        assert box == pytest.approx(tuple(v / 1000 for v in authors_box), abs=0.01)


def test_grounding_reply_fills_blocks_with_labels_and_boxes() -> None:
    page = lightonocr_recipe("lightonai/LightOnOCR-3-1B", mode="grounding").parse(
        reply(sample(GROUNDED))
    )
    labels = [block.label for block in page.blocks]
    assert labels == [
        BlockLabel.FIGURE,
        BlockLabel.CAPTION,
        BlockLabel.TITLE,
        BlockLabel.TEXT,
        BlockLabel.PAGE_FOOTER,
    ]
    for block, (label, box, _) in zip(page.blocks, AUTHORS_BLOCKS, strict=True):
        assert block.bbox == pytest.approx(tuple(v / 1000 for v in box), abs=0.01)
        assert block.source_label == (None if label in ("caption", "title", "text") else label)
    # The page number is furniture: an attribute, not body text.
    assert page.attributes["page_number"] == ["3"]
    assert page.attributes["figure_alts"] == [AUTHORS_BLOCKS[0][2]]
    (figure,) = page.figures
    assert figure.bbox == pytest.approx((0.309, 0.09, 0.691, 0.516))
    assert page.markdown.split("\n\n") == [
        "<!--figure:0-->",
        "Figure 1: Model architecture.",
        "## 2.2 LightOnOCR-1",
        AUTHORS_BLOCKS[3][2],
    ]


def test_a_continued_block_joins_the_previous_paragraph() -> None:
    text = "![text](100,100,450,900) The river rises\n![text+](550,100,900,400) in spring.\n"
    page = LightonocrRecipe(mode="grounding").parse(reply(text))
    assert page.markdown == "The river rises in spring."
    (block,) = page.blocks
    assert block.text == "The river rises in spring."
    assert block.bbox == pytest.approx((0.1, 0.1, 0.9, 0.9))
    # After page furniture there is nothing to continue: the block stands alone.
    text = (
        "![text](100,100,450,800) A.\n![footer](100,950,900,990) p. 4\n![text+](550,100,900,400) B."
    )
    page = LightonocrRecipe(mode="grounding").parse(reply(text))
    assert page.markdown == "A.\n\nB."
    assert [b.label for b in page.blocks] == [
        BlockLabel.TEXT,
        BlockLabel.PAGE_FOOTER,
        BlockLabel.TEXT,
    ]
    assert page.attributes["page_footer"] == ["p. 4"]


def test_plain_reply_is_markdown_without_boxes() -> None:
    text = (
        "## 2.2 LightOnOCR-1\n\nThe first version of LightOnOCR [13].\n\n"
        "<table><tr><td>a</td></tr></table>"
    )
    page = lightonocr_recipe("lightonai/LightOnOCR-2-1B").parse(reply(text))
    assert page.markdown == text
    assert [b.label for b in page.blocks] == [
        BlockLabel.SECTION_HEADER,
        BlockLabel.TEXT,
        BlockLabel.TABLE,
    ]
    assert all(b.bbox is None for b in page.blocks)


def test_grounding_reply_without_markers_is_malformed() -> None:
    with pytest.raises(ParseError) as caught:
        LightonocrRecipe(mode="grounding").parse(reply("just text, no markers"))
    assert caught.value.reason == "parse_error"
