"""The table-like layout test (ruling lines) on real pages of the corpus and drawn ones."""

from __future__ import annotations

import pytest
from PIL import Image, ImageDraw

from ocrflow.render.jobs import PageJob, RenderSpec, decode_image, render_pages
from ocrflow.render.rulings import Rulings, find_rulings
from tests.needs import CORPUS, need_corpus_file

PDFS = CORPUS / "pdfs"


@pytest.mark.parametrize(
    ("name", "page", "table_like"),
    [
        ("docling__2305.03393v1-pg9.pdf", 1, True),  # booktabs tables: three rules each
        ("olmocr__lots_of_sci_tables.pdf", 2, True),  # a fully ruled grid
        ("docling__normal_4pages.pdf", 1, False),  # prose under one rule
        ("ocrmypdf__linn.pdf", 1, False),  # a scanned manual page
    ],
)
def test_real_pages(name: str, page: int, table_like: bool) -> None:
    need_corpus_file(PDFS / name)
    spec = RenderSpec(target_dim=1280, text_layer="off", encoding="png")
    [rendered] = render_pages(PageJob(str(PDFS / name), "pdf", (page,), spec))
    assert rendered.image is not None
    assert find_rulings(decode_image(rendered.image)).table_like is table_like


def _page() -> tuple[Image.Image, ImageDraw.ImageDraw]:
    picture = Image.new("RGB", (1000, 1300), "white")
    return picture, ImageDraw.Draw(picture)


def test_a_drawn_grid_counts_its_rules_once_each_however_thick() -> None:
    picture, draw = _page()
    for y in (200, 400, 600, 800):
        draw.rectangle((100, y, 900, y + 5), fill="black")  # 6 px thick: one rule
    for x in (100, 500, 900):
        draw.line((x, 200, x, 805), fill="black", width=2)
    assert find_rulings(picture) == Rulings(horizontal=4, vertical=3)


def test_lines_of_words_are_not_rules() -> None:
    picture, draw = _page()
    for y in range(100, 1200, 30):
        for x in range(80, 900, 70):  # words: 55 px of ink, then a gap
            draw.rectangle((x, y, x + 55, y + 12), fill="black")
    rulings = find_rulings(picture)
    assert rulings == Rulings(0, 0) and not rulings.table_like


def test_two_rules_alone_are_not_a_table() -> None:
    picture, draw = _page()
    draw.line((50, 80, 950, 80), fill="black", width=2)  # under a running head
    draw.line((50, 1220, 950, 1220), fill="black", width=2)  # over a footer
    assert find_rulings(picture) == Rulings(2, 0)
    assert not find_rulings(picture).table_like
