"""The document model keeps a detected line's ends at its ink, not at the detector's padding."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ocrflow.engines.ink import PAD, to_ink, to_ink_paragraphs
from ocrflow.engines.layout import Paragraph, TextBox


def page_with_ink(x0: int, x1: int, top: int = 100, bottom: int = 140) -> np.ndarray:
    image = np.full((300, 1200, 3), 250, np.uint8)
    image[top + 10 : bottom - 10, x0:x1:6] = 20  # strokes, with paper between them
    return image


def test_a_padded_line_is_moved_in_to_its_ink() -> None:
    image = page_with_ink(200, 900)
    box = TextBox(170.0, 100.0, 930.0, 140.0, "a line", 0.9, 40.0)
    printed = to_ink(box, image)
    last_stroke = 200 + 6 * ((900 - 1 - 200) // 6)
    assert printed.x0 == pytest.approx(200 - PAD * 40)
    assert printed.x1 == pytest.approx(last_stroke + 1 + PAD * 40)
    assert (printed.y0, printed.y1, printed.text) == (box.y0, box.y1, box.text)


def test_a_line_is_never_widened_nor_moved_without_ink_to_go_by() -> None:
    image = page_with_ink(200, 900)
    tight = TextBox(201.0, 100.0, 890.0, 140.0, "cut", 0.9, 40.0)
    assert to_ink(tight, image).x0 >= tight.x0
    assert to_ink(tight, image).x1 <= tight.x1
    blank = TextBox(950.0, 100.0, 1100.0, 140.0, "nothing", 0.9, 40.0)
    assert to_ink(blank, image) == blank


def test_a_slanted_line_is_left_as_it_is() -> None:
    image = page_with_ink(200, 900)
    box = TextBox(170.0, 80.0, 930.0, 160.0, "slanted", 0.9, 40.0, angle=math.radians(3))
    assert to_ink(box, image) == box


def test_every_box_of_a_paragraph_is_moved_in() -> None:
    image = page_with_ink(200, 900)
    image[160:190, 200:700:6] = 20
    boxes = (
        TextBox(170.0, 100.0, 930.0, 140.0, "one", 0.9, 40.0),
        TextBox(170.0, 155.0, 930.0, 195.0, "two", 0.9, 40.0),
    )
    (paragraph,) = to_ink_paragraphs([Paragraph("one\ntwo", boxes)], image)
    assert paragraph.text == "one\ntwo"
    assert paragraph.boxes[1].x1 < 710 < paragraph.boxes[0].x1
