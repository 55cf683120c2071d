"""Columns kept apart in the searchable PDF's text layer (``pdf_text_gutters.py``): blocks
side by side are drawn at least ``GUTTER_ROOM`` font sizes apart, and a block under another
is set smaller where poppler would join the two and take in a third beside them; and
``pdftotext`` then reads such pages block by block."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ocrflow.sinks.pdf_text_gutters import GUTTER_ROOM, MOST_NARROWED, SHRINK, kept_apart
from ocrflow.sinks.pdf_text_sizes import LineSpan

from .test_pdf_text_sizes import _block, _right_edge, pdftotext_words, tight_column

WIDTH, HEIGHT = 612.0, 792.0
SIZE = 15.0  # every line's font size, points
PITCH = 12 / HEIGHT  # from one line to the next


def column(block: int, x0: float, x1: float, first: float, lines: int) -> dict[int, LineSpan]:
    """``lines`` lines of one block from ``x0`` to ``x1`` (points), from row ``first``."""
    return {
        block * 100 + row: LineSpan(
            block,
            x0 / WIDTH,
            0.1 + (first + row) * PITCH,
            x1 / WIDTH,
            0.1 + (first + row) * PITCH + 10 / HEIGHT,
        )
        for row in range(lines)
    }


def narrowed_lines(spans: dict[int, LineSpan]) -> dict[int, tuple[float, float]]:
    """The lines narrowed, every line at ``SIZE``."""
    return kept_apart(spans, dict.fromkeys(spans, SIZE), WIDTH, HEIGHT)[1]


def sizes_of(spans: dict[int, LineSpan]) -> dict[int, float]:
    """Each block's size as the layer sets it, every line at ``SIZE`` before."""
    sizes = kept_apart(spans, dict.fromkeys(spans, SIZE), WIDTH, HEIGHT)[0]
    return {spans[line].block: size for line, size in sizes.items()}


def gap_after(narrowed: dict[int, tuple[float, float]], spans: dict[int, LineSpan]) -> float:
    """Points from the left column's farthest line end to the right column's nearest start,
    as drawn."""
    drawn = {line: narrowed.get(line, (span.x0, span.x1)) for line, span in spans.items()}
    left = max(drawn[line][1] for line, span in spans.items() if span.block == 1)
    right = min(drawn[line][0] for line, span in spans.items() if span.block == 2)
    return (right - left) * WIDTH


def test_columns_closer_than_the_room_are_drawn_that_far_apart() -> None:
    spans = column(1, 54, 300, 0, 10) | column(2, 308, 556, 0, 10)
    narrowed = narrowed_lines(spans)
    assert set(narrowed) == set(spans)  # every line reaches the gutter
    assert gap_after(narrowed, spans) == pytest.approx(GUTTER_ROOM * SIZE)
    # The gutter's middle stays where it was; only the ends facing it move.
    for line, (x0, x1) in narrowed.items():
        span = spans[line]
        assert (x0 == span.x0) if span.block == 1 else (x1 == span.x1)


def test_columns_far_enough_apart_and_blocks_one_above_the_other_are_left_alone() -> None:
    apart = column(1, 54, 290, 0, 10) | column(2, 308, 556, 0, 10)  # 18 pt > 16.5 pt
    assert narrowed_lines(apart) == {}
    stacked = column(1, 54, 556, 0, 5) | column(2, 54, 556, 7, 5)
    assert narrowed_lines(stacked) == {}


def test_a_block_beside_a_paragraph_of_the_column_stacked_above_it_is_kept_from_it() -> None:
    """poppler reads a column's paragraphs less than 1.5 sizes apart as one block, as wide as
    its widest line: a right column beside the lower paragraph only is still within reach
    of the upper paragraph's long lines."""
    upper, lower = column(1, 54, 300, 0, 5), column(3, 54, 280, 5, 5)
    right = column(2, 308, 556, 6, 5)
    spans = upper | lower | right
    narrowed = narrowed_lines(spans)
    assert set(narrowed) == set(upper) | set(right)  # the lower one does not reach
    assert gap_after(narrowed, spans) == pytest.approx(GUTTER_ROOM * SIZE)


def test_a_short_line_is_not_squeezed_out_of_its_box() -> None:
    """A one-word label beside its text: narrowed by over ``MOST_NARROWED``, it stays."""
    label, text = column(1, 54, 64, 0, 1), column(2, 66, 556, 0, 1)
    spans = label | text
    narrowed = narrowed_lines(spans)
    assert 100 not in narrowed  # 7.25 of its 10 pt would go
    # The text gives its share (7.25 of 490 pt): half the room from the gap's middle.
    assert narrowed[200] == pytest.approx(((65 + GUTTER_ROOM * SIZE / 2) / WIDTH, 556 / WIDTH))
    assert MOST_NARROWED < 7.25 / 10


@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="[needs poppler] pdftotext")
def test_pdftotext_reads_columns_a_6_pt_gap_apart_one_after_the_other(tmp_path: Path) -> None:
    """Type on 9.9-pt leading is set at 12.4 pt, and poppler pulls a word within 0.7 sizes
    (8.7 pt) of a block's side into it: without the narrowing, the columns read across."""
    left = tight_column(0.08, "L", 8)
    right = tight_column(_right_edge(left) + 6 / 612, "R", 5)
    written, read = pdftotext_words([*left, *right], tmp_path)
    assert read == written


def test_a_paragraph_under_a_column_is_set_apart_from_it_where_joined_it_would_take_in_a_box() -> (
    None
):
    """A Wikipedia printout: the body, the infobox beside it, a paragraph across the page
    1.5 lines under the body (18 pt: poppler joins lines up to 22.5 pt apart). Joined, the
    body and the paragraph would lie over the infobox and read it in, line by line."""
    body, infobox = column(1, 54, 280, 0, 10), column(2, 300, 540, 2, 6)
    below = column(3, 54, 540, 10.5, 4)
    assert sizes_of(body | infobox | below) == {1: SIZE, 2: SIZE, 3: SHRINK * SIZE}
    # Nothing beside the body: the paragraph under it may well be joined to it.
    assert sizes_of(body | below) == {1: SIZE, 3: SIZE}
    # Far enough under it (two lines: 24 pt), poppler never joins them.
    assert sizes_of(body | infobox | column(3, 54, 540, 11, 4)) == {1: SIZE, 2: SIZE, 3: SIZE}


def test_columns_under_a_paragraph_across_the_page_are_set_apart_from_it() -> None:
    above = column(1, 54, 556, 0, 4)
    left, right = column(2, 54, 290, 4.5, 10), column(3, 320, 556, 4.5, 10)
    assert sizes_of(above | left | right) == {1: SIZE, 2: SHRINK * SIZE, 3: SHRINK * SIZE}


@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="[needs poppler] pdftotext")
def test_pdftotext_reads_a_paragraph_across_two_columns_then_each_column(tmp_path: Path) -> None:
    """Columns 1.5 lines under a paragraph across them: poppler joined all three into one
    block, and read the columns across, line by line."""
    words = [[(f"A{i}w{j}", 0.0105) for j in range(18)] for i in range(3)]
    above = _block(words, 0.08, 0.10)
    top = 0.10 + 3.5 * 0.0125
    left = _block([[(f"L{i}w{j}", 0.0105) for j in range(8)] for i in range(10)], 0.08, top)
    right = _block([[(f"R{i}w{j}", 0.0105) for j in range(8)] for i in range(10)], 0.52, top)
    written, read = pdftotext_words([above, left, right], tmp_path)
    assert read == written
