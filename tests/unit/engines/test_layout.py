"""Reading order from synthetic OCR boxes: lines, paragraphs, columns."""

from __future__ import annotations

import random

import pytest

from ocrflow.engines.layout import (
    TextBox,
    group_blocks,
    layout_text,
    order_blocks,
    paragraphs_in_order,
    split_paragraphs,
)

HEIGHT = 20.0
LEADING = 25.0  # 5 px between lines: a paragraph's line spacing


def line(x0: float, y0: float, x1: float, text: str) -> TextBox:
    """A text line ``HEIGHT`` px high."""
    return TextBox(x0, y0, x1, y0 + HEIGHT, text, 0.99, HEIGHT)


def paragraph(x0: float, x1: float, y0: float, name: str, lines: int = 3) -> list[TextBox]:
    """``lines`` justified lines named ``name1``, ``name2``…; the last one is short."""
    boxes = [line(x0, y0 + i * LEADING, x1, f"{name}{i + 1}") for i in range(lines - 1)]
    last = line(x0, y0 + (lines - 1) * LEADING, x0 + (x1 - x0) / 3, f"{name}{lines}")
    return [*boxes, last]


def words(text: str) -> list[str]:
    return text.split()


def test_single_column_reads_top_to_bottom_whatever_the_input_order() -> None:
    boxes = paragraph(100, 900, 100, "a", 4)
    random.Random(1).shuffle(boxes)
    assert words(layout_text(boxes)) == ["a1", "a2", "a3", "a4"]


def test_lines_join_with_newlines_and_paragraphs_with_a_blank_line() -> None:
    boxes = paragraph(100, 900, 100, "a", 3) + paragraph(100, 900, 200, "b", 2)
    assert layout_text(boxes) == "a1\na2\na3\n\nb1\nb2"


def test_two_columns_read_column_one_then_column_two() -> None:
    left = paragraph(100, 480, 300, "L", 4) + paragraph(100, 480, 420, "M", 3)
    right = paragraph(520, 900, 300, "R", 5) + paragraph(520, 900, 445, "S", 3)
    assert words(layout_text(right + left)) == [
        *("L1", "L2", "L3", "L4", "M1", "M2", "M3"),
        *("R1", "R2", "R3", "R4", "R5", "S1", "S2", "S3"),
    ]


def test_full_width_parts_stay_above_and_below_the_columns() -> None:
    """The linn brochure shape: full-width text, two columns, full-width text."""
    top = paragraph(100, 900, 100, "T", 3)
    left = paragraph(100, 480, 300, "L", 4)
    right = paragraph(520, 900, 300, "R", 4)
    bottom = paragraph(100, 900, 500, "B", 2)
    order = words(layout_text(bottom + right + left + top))
    assert order == [
        *("T1", "T2", "T3", "L1", "L2", "L3", "L4"),
        *("R1", "R2", "R3", "R4", "B1", "B2"),
    ]


def test_a_full_width_heading_separates_two_column_sections() -> None:
    upper = paragraph(100, 480, 100, "a", 3) + paragraph(520, 900, 100, "b", 3)
    heading = [line(300, 220, 700, "HEADING")]
    lower = paragraph(100, 480, 270, "c", 3) + paragraph(520, 900, 270, "d", 3)
    order = words(layout_text(lower + heading + upper))
    assert order == [
        *("a1", "a2", "a3", "b1", "b2", "b3", "HEADING"),
        *("c1", "c2", "c3", "d1", "d2", "d3"),
    ]


def test_column_lines_side_by_side_are_never_merged_into_one_line() -> None:
    """A narrow gutter (half a text height) still separates the columns."""
    left = [line(100, 100 + i * LEADING, 490, f"L{i}") for i in range(4)]
    right = [line(500, 100 + i * LEADING, 900, f"R{i}") for i in range(4)]
    assert layout_text(left + right) == "L0\nL1\nL2\nL3\n\nR0\nR1\nR2\nR3"


def test_bullets_start_paragraphs_and_hanging_indents_do_not() -> None:
    boxes = [
        line(100, 100, 900, "• first item that runs"),
        line(130, 125, 700, "on a second line"),
        line(100, 150, 900, "• second item"),
    ]
    assert paragraphs_in_order(boxes) == [
        "• first item that runs\non a second line",
        "• second item",
    ]


def test_a_first_line_indent_starts_a_paragraph() -> None:
    block = group_blocks(
        [
            line(100, 100, 900, "end of one paragraph"),
            line(140, 125, 900, "indented start of the next"),
            line(100, 150, 900, "and its second line"),
        ]
    )
    assert len(block) == 1
    assert [len(p) for p in split_paragraphs(block[0])] == [1, 2]


def test_a_wide_vertical_gap_starts_a_new_block() -> None:
    boxes = [line(100, 100, 900, "one"), line(100, 125, 900, "two"), line(100, 170, 900, "three")]
    assert [len(b.lines) for b in group_blocks(boxes)] == [2, 1]


def test_a_heading_narrower_than_its_text_is_its_own_paragraph() -> None:
    boxes = [line(100, 100, 300, "Heading"), *paragraph(100, 900, 125, "p", 3)]
    assert paragraphs_in_order(boxes) == ["Heading", "p1\np2\np3"]


def test_order_blocks_returns_every_block_once() -> None:
    rng = random.Random(3)
    boxes = [
        line(x, y, x + rng.uniform(30, 400), f"w{i}")
        for i, (x, y) in enumerate((rng.uniform(0, 800), rng.uniform(0, 1200)) for _ in range(80))
    ]
    blocks = group_blocks(boxes)
    ordered = order_blocks(blocks)
    assert sorted(map(id, ordered)) == sorted(map(id, blocks))
    assert sorted(words(layout_text(boxes))) == sorted(b.text for b in boxes)


def test_no_boxes_give_no_text() -> None:
    assert layout_text([]) == ""
    assert layout_text([line(0, 0, 100, "   ")]) == ""


def test_from_quad_measures_height_along_a_skewed_box() -> None:
    # A 200 x 20 box turned by about 5.7 degrees: its bounds are taller than its text.
    box = TextBox.from_quad([(0, 20), (199, 0), (201, 20), (2, 40)], "skewed", 0.9)
    assert (box.x0, box.y0, box.x1, box.y1) == (0, 0, 201, 40)
    assert box.text_height == pytest.approx(20.1, abs=0.1)
    assert box.score == pytest.approx(0.9)
