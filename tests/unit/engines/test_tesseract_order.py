"""Tesseract's blocks in its order, but for a heading it read between two columns that both
end above it (``engines/tesseract_tsv.in_page_order``)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ocrflow.engines.tesseract import TesseractEngine
from ocrflow.engines.tesseract_tsv import in_page_order
from ocrflow.types import BBox, Block, BlockLabel


def block(name: str, box: BBox) -> Block:
    return Block(BlockLabel.TEXT, name, box)


def names(blocks: tuple[Block, ...]) -> list[str]:
    return [b.text for b in blocks]


LEFT = [block("left1", (0.1, 0.1, 0.45, 0.3)), block("left2", (0.1, 0.32, 0.45, 0.6))]
RIGHT = [block("right1", (0.55, 0.1, 0.9, 0.4)), block("right2", (0.55, 0.42, 0.9, 0.6))]
LIST = block("list", (0.1, 0.67, 0.9, 0.9))


def test_a_heading_read_between_the_columns_goes_after_them() -> None:
    heading = block("heading", (0.1, 0.63, 0.3, 0.65))  # under both, just over its list
    assert names(in_page_order([*LEFT, heading, *RIGHT, LIST])) == [
        "left1", "left2", "right1", "right2", "heading", "list",
    ]  # fmt: skip


def test_a_column_s_last_paragraph_after_a_short_column_stays() -> None:
    # The left column goes on under the right one's end: its last paragraph is closer to
    # the paragraph above it than to what follows under both.
    last = block("left3", (0.1, 0.62, 0.45, 0.7))
    below = block("footer", (0.1, 0.8, 0.9, 0.85))
    ordered = [*LEFT, last, *RIGHT, below]
    assert names(in_page_order(ordered)) == names(tuple(ordered))
    # Columns read in order, and a page in one column, stay as they are.
    assert names(in_page_order([*LEFT, *RIGHT, LIST])) == [
        "left1",
        "left2",
        "right1",
        "right2",
        "list",
    ]
    assert in_page_order([]) == ()


@pytest.mark.skipif(shutil.which("tesseract") is None, reason="[needs tesseract] not installed")
def test_linn_s_heading_under_both_columns_is_read_after_them(corpus: Path) -> None:
    # Tesseract reads "Additional Features" after the first column, in the middle of a
    # sentence that runs on into the second; pdftotext of the PDF reads it after both.
    data = (corpus / "images" / "ocrmypdf__linn.png").read_bytes()
    text = TesseractEngine().read(data, dpi=300).text
    assert text.index("demonstration!") < text.index("Additional Features")
    assert text.index("Additional Features") < text.index("easy to learn operation")
