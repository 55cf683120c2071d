"""Where the ``alto`` and ``hocr`` sinks put boxes an engine did not give: text-layer pages
get a nominal or their PDF size, blocks without boxes are laid out down the page and marked
estimated, a one-line paragraph is wrapped, a turned page's words run along its lines. Each
ALTO validates against the vendored XSD and the hOCR holds the same words at the same boxes.
"""

from __future__ import annotations

import pytest
from lxml import etree, html

from ocrflow.document import Page
from ocrflow.sinks.alto import render_alto
from ocrflow.sinks.hocr import render_hocr
from ocrflow.sinks.layout_pages import NOMINAL_SIZE
from ocrflow.types import Block, BlockLabel, ImageSize, Line, Route
from tests.unit.sinks.alto_hocr_helpers import (
    NS,
    alto_schema,
    assert_same_words,
    assert_valid,
    document_of,
)


@pytest.fixture(scope="module")
def schema() -> etree.XMLSchema:
    """The vendored ALTO schema, parsed once for this module."""
    return alto_schema()


def test_text_layer_pages_get_a_nominal_or_their_pdf_size(schema) -> None:
    lines = (Line("Hello world", (0.1, 0.1, 0.5, 0.12)),)
    block = Block(BlockLabel.TEXT, "Hello world", (0.1, 0.1, 0.5, 0.12), None, lines)
    nominal = Page(1, "Hello world", Route.TEXT_LAYER, blocks=(block,))
    letter = Page(
        2, "Hello world", Route.TEXT_LAYER, blocks=(block,), attributes={"page_points": [612, 792]}
    )
    document = document_of(nominal, letter, engine="embedded")
    alto = render_alto(document)
    assert_valid(schema, alto)
    sizes = [
        (p.get("WIDTH"), p.get("HEIGHT")) for p in etree.fromstring(alto).iterfind(".//a:Page", NS)
    ]
    assert sizes == [tuple(str(v) for v in NOMINAL_SIZE), ("2550", "3300")]
    words = assert_same_words(alto, render_hocr(document))
    # The estimated words share the line's width by their length: "Hello" starts it.
    assert words[1][0] == ("Hello", (248.0, 350.0, 699.0, 421.0), None)
    assert words[2][1][1][2] == 1275.0  # "world" ends where the line does (0.5 x 2550)


def test_blocks_without_boxes_are_laid_out_down_the_page_and_marked_estimated(schema) -> None:
    blocks = (
        Block(BlockLabel.SECTION_HEADER, "## First heading"),
        Block(BlockLabel.TEXT, "one two three\nfour five"),
        Block(BlockLabel.LIST_ITEM, "- six"),
    )
    page = Page(1, "", Route.ENGINE, blocks=blocks, size=ImageSize(800, 1000))
    document = document_of(page, engine="vllm")
    alto = render_alto(document)
    assert_valid(schema, alto)
    words = assert_same_words(alto, render_hocr(document))[1]
    assert " ".join(w for w, _, _ in words) == "First heading one two three four five six"
    tops = [box[1] for _, box, _ in words]
    assert tops == sorted(tops) and tops[0] >= 50  # reading order, below the top margin
    root = etree.fromstring(alto)
    assert all(
        "GEOMETRY_ESTIMATED" in b.get("TAGREFS") for b in root.iterfind(".//a:TextBlock", NS)
    )
    assert root.find(".//a:OtherTag", NS).get("ID") == "GEOMETRY_ESTIMATED"
    assert len(html.fromstring(render_hocr(document)).xpath("//*[@data-geometry='estimated']")) == 3


def test_a_paragraph_written_as_one_line_is_wrapped_across_the_page(schema) -> None:
    paragraph = " ".join(f"word{i}" for i in range(60))  # 419 characters
    page = Page(
        1, "", Route.ENGINE, blocks=(Block(BlockLabel.TEXT, paragraph),), size=ImageSize(1000, 1400)
    )
    alto = render_alto(document_of(page))
    assert_valid(schema, alto)
    lines = etree.fromstring(alto).findall(".//a:TextLine", NS)
    assert len(lines) == 5  # about 90 characters a line
    counts = [len(line.findall("a:String", NS)) for line in lines]
    assert sum(counts) == 60 and max(counts) <= 14
    tops = [int(line.get("VPOS")) for line in lines]
    assert tops == sorted(tops) and len(set(tops)) == 5


def test_a_turned_page_gets_its_words_along_its_lines(schema) -> None:
    # The engine turned the page 90 degrees clockwise to read it: on the page as rendered
    # the line runs up the page, so its first word is at the bottom.
    line = Line("alpha beta gamma", (0.1, 0.2, 0.15, 0.8), 0.9)
    block = Block(BlockLabel.TEXT, "alpha beta gamma", (0.1, 0.2, 0.15, 0.8), 0.9, (line,))
    page = Page(1, "", Route.ENGINE, blocks=(block,), size=ImageSize(1400, 1000), rotation=90)
    document = document_of(page)
    alto = render_alto(document)
    assert_valid(schema, alto)
    words = assert_same_words(alto, render_hocr(document))[1]
    assert [w for w, _, _ in words] == ["alpha", "beta", "gamma"]
    bottoms = [box[3] for _, box, _ in words]
    assert bottoms[0] == 800.0 and bottoms[0] > bottoms[1] > bottoms[2]
    assert all(box[0] >= 140 and box[2] <= 210 for _, box, _ in words)  # within the line
    assert etree.fromstring(alto).find(".//a:TextBlock", NS).get("ROTATION") == "90"
    assert (
        "textangle 90"
        in html.fromstring(render_hocr(document)).xpath("//*[@class='ocr_line']/@title")[0]
    )


def test_a_turned_vlm_page_keeps_the_size_of_the_page_as_rendered() -> None:
    # Readers record the page as rendered (its boxes' frame), whatever turn the engine
    # gave the image it read: the size is used as it is.
    block = Block(BlockLabel.TEXT, "x", (0.1, 0.1, 0.2, 0.2))
    attributes = {"rotation": 90, "shrinks": 0}
    page = Page(
        1,
        "x",
        Route.ENGINE,
        blocks=(block,),
        size=ImageSize(1000, 1400),
        rotation=90,
        attributes=attributes,
    )
    page_element = etree.fromstring(render_alto(document_of(page))).find(".//a:Page", NS)
    assert (page_element.get("WIDTH"), page_element.get("HEIGHT")) == ("1000", "1400")
