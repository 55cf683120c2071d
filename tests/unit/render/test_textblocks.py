"""Text-layer blocks: PDFs written by hand with every word at a known place (Courier, whose
glyphs are all 0.6 em wide), shown upright or turned by ``/Rotate``; every word lies in
its line's box and its block's, as fractions of the page as shown."""

from __future__ import annotations

import pickle
from pathlib import Path

import pypdfium2 as pdfium
import pytest

from ocrflow.render.jobs import PageJob, RenderSpec, render_pages
from ocrflow.render.textlayer import extract_text_layer
from ocrflow.types import BlockLabel
from tests.pdfwords import Page, inside, make_pdf, paragraph_words

#: Slack for Courier's side bearings and the gap between its glyph outlines and em box.
TOLERANCE = 0.004

FIRST = ["Quarterly archive report", "covering letters and invoices"]
SECOND = ["Scanning costs fell sharply", "after new machines arrived"]
LIST = ["- boxes were counted twice"]


def _page(rotate: int) -> Page:
    words = (
        paragraph_words(FIRST, top=700)
        + paragraph_words(SECOND, top=560)
        + paragraph_words(LIST, top=420)
    )
    return Page(words, rotate=rotate)


@pytest.mark.parametrize("rotate", [0, 90, 180, 270])
def test_every_word_lies_in_its_line_and_block(rotate: int) -> None:
    spec = _page(rotate)
    pdf = pdfium.PdfDocument(make_pdf([spec]))
    layer = extract_text_layer(pdf[0])
    blocks = layer.blocks
    assert len(blocks) == 3, [b.text for b in blocks]
    for word in spec.words:
        box = spec.word_box(word)
        lines = [ln for b in blocks for ln in b.lines if word.text in ln.text.split()]
        assert lines and any(inside(box, ln.bbox, TOLERANCE) for ln in lines), (word, box, lines)
        holders = [b for b in blocks if word.text in b.text.split()]
        assert any(inside(box, b.bbox, TOLERANCE) for b in holders), (word, box)
    for block in blocks:
        assert block.bbox is not None and all(inside(ln.bbox, block.bbox, 0) for ln in block.lines)  # type: ignore[arg-type]


def test_blocks_follow_the_text_in_order_with_list_items() -> None:
    pdf = pdfium.PdfDocument(make_pdf([_page(0)]))
    layer = extract_text_layer(pdf[0])
    assert "\n\n".join(b.text for b in layer.blocks) == layer.text
    assert [b.label for b in layer.blocks] == [
        BlockLabel.TEXT,
        BlockLabel.TEXT,
        BlockLabel.LIST_ITEM,
    ]
    assert [len(b.lines) for b in layer.blocks] == [2, 2, 1]
    assert all(b.confidence is None for b in layer.blocks), "native text has no score"


def test_a_page_without_text_has_no_blocks() -> None:
    pdf = pdfium.PdfDocument(make_pdf([Page([])]))
    assert extract_text_layer(pdf[0]).blocks == ()


def test_the_render_worker_hands_the_blocks_back(tmp_path: Path) -> None:
    path = tmp_path / "doc.pdf"
    path.write_bytes(make_pdf([_page(90)]))
    (page,) = render_pages(PageJob(str(path), "pdf", (1,), RenderSpec(text_layer="only")))
    assert page.text_ok and len(page.text_blocks) == 3
    assert pickle.loads(pickle.dumps(page)) == page, "blocks cross the process boundary"
