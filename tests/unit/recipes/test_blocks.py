"""Recipe blocks: grounded replies (DeepSeek-OCR, dots.ocr, Chandra) written from one
layout whose words sit in known regions, and the test server's own grounded replies:
every word lies inside its block's box, labels map onto the model's vocabulary, blocks
come in the reply's order. Markdown-only recipes give the Markdown's structure."""

from __future__ import annotations

import json

import pytest

from ocrflow.document import BlockLabel
from ocrflow.recipes.base import ParsedPage
from ocrflow.recipes.chandra import ChandraRecipe, chandra_recipe
from ocrflow.recipes.deepseek import GRID, DeepseekRecipe, deepseek_recipe
from ocrflow.recipes.dots import MAX_PIXELS, MIN_PIXELS, DotsRecipe, dots_recipe
from ocrflow.recipes.layout import smart_resize
from ocrflow.recipes.markdown import MarkdownRecipe
from ocrflow.recipes.olmocr import OlmocrRecipe
from ocrflow.types import BBox, Block
from tests.fakevllm.replies import OLMOCR_FRONT_MATTER, normal_text

from .helpers import reply

WIDTH, HEIGHT = 996, 1288

#: (our label, region box in 0..1, text): what the page holds and where.
LAYOUT: tuple[tuple[BlockLabel, BBox, str], ...] = (
    (BlockLabel.PAGE_HEADER, (0.08, 0.02, 0.92, 0.04), "Northwind bulletin"),
    (BlockLabel.TITLE, (0.1, 0.06, 0.9, 0.1), "Harbour Ledger"),
    (BlockLabel.SECTION_HEADER, (0.1, 0.12, 0.6, 0.15), "Income statement"),
    (BlockLabel.TEXT, (0.1, 0.17, 0.48, 0.5), "Revenue grew in every northern region"),
    (BlockLabel.TEXT, (0.52, 0.17, 0.9, 0.5), "Costs fell after scanners arrived"),
    (BlockLabel.FIGURE, (0.15, 0.52, 0.85, 0.8), ""),
    (BlockLabel.CAPTION, (0.15, 0.81, 0.85, 0.84), "Quarterly totals chart"),
    (BlockLabel.FORMULA, (0.3, 0.86, 0.7, 0.9), "E = mc^2"),
    (BlockLabel.PAGE_FOOTER, (0.4, 0.96, 0.6, 0.98), "seventeen"),
)

DEEPSEEK_LABELS = {
    BlockLabel.PAGE_HEADER: "header",
    BlockLabel.TITLE: "title",
    BlockLabel.SECTION_HEADER: "sub_title",
    BlockLabel.TEXT: "text",
    BlockLabel.FIGURE: "image",
    BlockLabel.CAPTION: "image_caption",
    BlockLabel.FORMULA: "equation",
    BlockLabel.PAGE_FOOTER: "footer",
}
DOTS_LABELS = {
    BlockLabel.PAGE_HEADER: "Page-header",
    BlockLabel.TITLE: "Title",
    BlockLabel.SECTION_HEADER: "Section-header",
    BlockLabel.TEXT: "Text",
    BlockLabel.FIGURE: "Picture",
    BlockLabel.CAPTION: "Caption",
    BlockLabel.FORMULA: "Formula",
    BlockLabel.PAGE_FOOTER: "Page-footer",
}
CHANDRA_LABELS = {
    BlockLabel.PAGE_HEADER: "Page-Header",
    BlockLabel.TITLE: "Section-Header",
    BlockLabel.SECTION_HEADER: "Section-Header",
    BlockLabel.TEXT: "Text",
    BlockLabel.FIGURE: "Image",
    BlockLabel.CAPTION: "Caption",
    BlockLabel.FORMULA: "Equation-Block",
    BlockLabel.PAGE_FOOTER: "Page-Footer",
}


def deepseek_reply() -> str:
    parts = []
    for label, (x0, y0, x1, y1), text in LAYOUT:
        grid = [round(v * GRID) for v in (x0, y0, x1, y1)]
        parts.append(f"<|ref|>{DEEPSEEK_LABELS[label]}<|/ref|><|det|>[{grid}]<|/det|>\n{text}\n")
    return "\n".join(parts)


def dots_reply() -> str:
    width, height = smart_resize(WIDTH, HEIGHT, min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS)
    cells = []
    for label, (x0, y0, x1, y1), text in LAYOUT:
        cell = {
            "bbox": [round(x0 * width), round(y0 * height), round(x1 * width), round(y1 * height)],
            "category": DOTS_LABELS[label],
        }
        if text:
            cell["text"] = f"$${text}$$" if label is BlockLabel.FORMULA else text
        cells.append(cell)
    return json.dumps(cells)


def chandra_reply(scale: int = 1024) -> str:
    divs = []
    for label, box, text in LAYOUT:
        grid = " ".join(str(round(v * scale)) for v in box)
        inner = f"<p>{text}</p>" if text else '<img alt="a bar chart"/>'
        if label is BlockLabel.FORMULA:
            inner = f'<math display="block">{text}</math>'
        divs.append(f'<div data-bbox="{grid}" data-label="{CHANDRA_LABELS[label]}">{inner}</div>')
    return "\n".join(divs)


def _parse(recipe: object, text: str) -> ParsedPage:
    return recipe.parse(reply(text, image_width=WIDTH, image_height=HEIGHT))  # type: ignore[attr-defined]


def inside(inner: BBox, outer: BBox | None, slack: float) -> bool:
    if outer is None:
        return False
    return all(inner[i] >= outer[i] - slack for i in (0, 1)) and all(
        inner[i] <= outer[i] + slack for i in (2, 3)
    )


def holder(blocks: tuple[Block, ...], word: str) -> Block:
    (found,) = [b for b in blocks if word in b.text.replace("$", " ").split()]
    return found


def chandra2_reply() -> str:
    """Chandra 2 writes its boxes on a 0-1000 grid."""
    return chandra_reply(1000)


CASES = [
    (DeepseekRecipe(), deepseek_reply, 1 / GRID),
    (DotsRecipe(), dots_reply, 1 / 700),
    (ChandraRecipe(), chandra_reply, 1 / 1024),
    (chandra_recipe("datalab-to/chandra-ocr-2"), chandra2_reply, 1 / 1000),
    (deepseek_recipe("deepseek-ai/DeepSeek-OCR-2"), deepseek_reply, 1 / GRID),
    (dots_recipe("rednote-hilab/dots.mocr"), dots_reply, 1 / 700),
]
IDS = ["deepseek", "dots", "chandra", "chandra2", "deepseek-ocr2", "dots.mocr"]


@pytest.mark.parametrize(("recipe", "write", "slack"), CASES, ids=IDS)
def test_every_word_lies_in_its_blocks_box(recipe: object, write: object, slack: float) -> None:
    parsed = _parse(recipe, write())  # type: ignore[operator]
    for _, box, text in LAYOUT:
        for word in text.split():
            block = holder(parsed.blocks, word)
            assert inside(box, block.bbox, slack) and inside(block.bbox, box, slack), (word, block)  # type: ignore[arg-type]


@pytest.mark.parametrize(("recipe", "write", "slack"), CASES, ids=IDS)
def test_blocks_map_labels_and_keep_the_reply_order(
    recipe: object, write: object, slack: float
) -> None:
    parsed = _parse(recipe, write())  # type: ignore[operator]
    expected = [label for label, _, _ in LAYOUT]
    if isinstance(recipe, ChandraRecipe):  # Chandra has one heading label for both
        expected[1] = BlockLabel.SECTION_HEADER
    assert [b.label for b in parsed.blocks] == expected
    names = {DeepseekRecipe: DEEPSEEK_LABELS, DotsRecipe: DOTS_LABELS}.get(
        type(recipe), CHANDRA_LABELS
    )
    model_labels = [names[label] for label, _, _ in LAYOUT]
    kept = [
        None if m == str(b.label) else m for m, b in zip(model_labels, parsed.blocks, strict=True)
    ]
    assert [b.source_label for b in parsed.blocks] == kept, "the model's own label is kept"
    (figure,) = [b for b in parsed.blocks if b.label is BlockLabel.FIGURE]
    assert parsed.figures[0].placeholder in figure.text, "the figure block holds its placeholder"
    for block in parsed.blocks:
        if block.label not in (BlockLabel.PAGE_HEADER, BlockLabel.PAGE_FOOTER, BlockLabel.FIGURE):
            assert block.text in parsed.markdown, "a body block's text is in the page's Markdown"
    assert "Northwind" not in parsed.markdown, "furniture stays out of the Markdown"


def test_the_test_servers_grounded_reply_gives_boxed_blocks() -> None:
    tag = "page-0123456789ab"
    text = normal_text("deepseek", [tag], 0.0, 120, figures=2)
    parsed = DeepseekRecipe().parse(reply(text))
    title, body, *figures = parsed.blocks
    seed = int(tag[-6:], 16)
    x1, y1 = seed % 400, (seed // 7) % 500
    assert title.label is BlockLabel.TITLE and tag in title.text
    assert title.bbox == pytest.approx(
        (x1 / GRID, y1 / GRID, (x1 + 500) / GRID, (y1 + 300) / GRID), abs=1e-4
    )
    assert body.label is BlockLabel.TEXT and "(temperature 0.0)" in body.text
    assert [f.label for f in figures] == [BlockLabel.FIGURE] * 2
    for block, figure in zip(figures, parsed.figures, strict=True):
        assert block.bbox == pytest.approx(figure.bbox, abs=1e-4)
        assert block.text == figure.placeholder


def test_deepseek_page_numbers_are_furniture_by_place() -> None:
    text = (
        "<|ref|>page_number<|/ref|><|det|>[[450, 20, 550, 40]]<|/det|>\n3\n"
        "<|ref|>text<|/ref|><|det|>[[100, 100, 900, 800]]<|/det|>\nBody text here\n"
        "<|ref|>page_number<|/ref|><|det|>[[450, 960, 550, 990]]<|/det|>\n4\n"
        "<|ref|>marginalia<|/ref|><|det|>[[0, 0, bad]]<|/det|>\nA note\n"
    )
    blocks = DeepseekRecipe().parse(reply(text)).blocks
    assert [b.label for b in blocks] == [
        BlockLabel.PAGE_HEADER,
        BlockLabel.TEXT,
        BlockLabel.PAGE_FOOTER,
        BlockLabel.TEXT,
    ]
    assert blocks[3].source_label == "marginalia" and blocks[3].bbox is None


def test_dots_blocks_have_no_box_when_the_image_size_is_unknown() -> None:
    text = json.dumps([{"bbox": [1, 2, 30, 40], "category": "Text", "text": "Hello there"}])
    (block,) = DotsRecipe().parse(reply(text)).blocks
    assert block.text == "Hello there" and block.bbox is None


def test_markdown_recipes_give_the_markdown_structure() -> None:
    text = "# Report\n\nSome text here.\n\n- one\n- two\n\n<table><tr><td>1</td></tr></table>"
    parsed = MarkdownRecipe().parse(reply(text))
    assert [b.label for b in parsed.blocks] == [
        BlockLabel.TITLE,
        BlockLabel.TEXT,
        BlockLabel.LIST_ITEM,
        BlockLabel.LIST_ITEM,
        BlockLabel.TABLE,
    ]
    assert all(b.bbox is None for b in parsed.blocks)


def test_olmocr_blocks_follow_the_markdown_and_figures_get_their_box() -> None:
    body = "## Methods\n\nWe measured it.\n\n![chart](page_100_200_300_400.png)\n\n$$\nx^2\n$$"
    parsed = OlmocrRecipe().parse(reply(OLMOCR_FRONT_MATTER + body, image_width=WIDTH,
                                        image_height=HEIGHT))  # fmt: skip
    labels = [b.label for b in parsed.blocks]
    assert labels == [
        BlockLabel.SECTION_HEADER,
        BlockLabel.TEXT,
        BlockLabel.FIGURE,
        BlockLabel.FORMULA,
    ]
    figure = parsed.blocks[2]
    assert figure.text == parsed.figures[0].placeholder
    assert figure.bbox == pytest.approx(parsed.figures[0].bbox, abs=1e-4)
    assert all(b.bbox is None for b in parsed.blocks if b is not figure)
