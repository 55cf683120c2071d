"""Lines the detector joined across a column gutter are cut there, and only there."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont
from two_columns import FONT_FILE, two_column_page

from ocrflow.engines.embedded import EmbeddedEngine
from ocrflow.engines.gutters import split_at_gutters
from ocrflow.evaluation.metrics import score_text

FONT = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
LINE = 40  # a line's box height, px
STEP = 50  # from one line to the next, px
LEFT, GUTTER_AT, GUTTER, RIGHT_END = 100, 1000, 50, 1950


def quad(x0: float, y0: float, x1: float, y1: float) -> list[list[float]]:
    return [[x0, y0], [x1, y0], [x1, y1], [x0, y1]]


def inked(spans: list[tuple[float, float]], per_row: int) -> np.ndarray:
    """A white page with a black bar (ink) over each (x0, x1) span, ``per_row`` spans a row."""
    rows = (len(spans) + per_row - 1) // per_row
    image = np.full((STEP * rows + 100, 2100, 3), 255, np.uint8)
    for i, (x0, x1) in enumerate(spans):
        top = 50 + STEP * (i // per_row)
        image[top + 8 : top + LINE - 8, int(x0) : int(x1)] = 0
    return image


def two_columns(lines: int) -> list[tuple[float, float]]:
    """Each row: the left column's line, then the right column's, as ink spans."""
    return [(LEFT, GUTTER_AT), (GUTTER_AT + GUTTER, RIGHT_END)] * lines


def quads_of(spans: list[tuple[float, float]], per_row: int) -> np.ndarray:
    """The spans' boxes, ``per_row`` spans a row, padded as the detector pads them."""
    boxes = []
    for i, (x0, x1) in enumerate(spans):
        top = 50 + STEP * (i // per_row)
        boxes.append(quad(x0 - 6, top, x1 + 6, top + LINE))
    return np.array(boxes, np.float32)


def across(row: int) -> np.ndarray:
    """One box over a whole row, both columns: what the detector gives when it joins them."""
    return np.array([quad(LEFT - 6, 50 + STEP * row, RIGHT_END + 6, 50 + STEP * row + LINE)])


def test_a_line_joined_across_the_gutter_is_cut_at_its_gap() -> None:
    rows = two_columns(6)
    joined = np.concatenate([across(0), quads_of(rows, per_row=2)[2:]]).astype(np.float32)
    cut = split_at_gutters(joined, inked(rows, per_row=2))
    assert len(cut) == len(joined) + 1
    left, right = cut[0], cut[1]
    # The gap stays between the pieces: the ink ends at GUTTER_AT and resumes after it.
    assert left[:, 0].min() == pytest.approx(LEFT - 6)
    assert GUTTER_AT <= left[:, 0].max() <= GUTTER_AT + 2
    assert GUTTER_AT + GUTTER - 2 <= right[:, 0].min() <= GUTTER_AT + GUTTER
    assert right[:, 0].max() == pytest.approx(RIGHT_END + 6)
    assert np.array_equal(cut[2:], joined[1:])


def test_two_joined_lines_one_over_the_other_are_both_cut() -> None:
    rows = two_columns(6)
    quads = quads_of(rows, per_row=2)
    joined = np.concatenate([quads[:4], across(2), across(3), quads[8:]]).astype(np.float32)
    assert len(split_at_gutters(joined, inked(rows, per_row=2))) == len(joined) + 2


def test_a_line_inked_across_the_gutter_stays_whole() -> None:
    """A title over two columns: its neighbours leave a gutter, its ink does not."""
    spans = [(LEFT, RIGHT_END), (0, 0), *two_columns(5)]  # the title, inked all along
    quads = np.concatenate([across(0), quads_of(spans, per_row=2)[2:]]).astype(np.float32)
    assert np.array_equal(split_at_gutters(quads, inked(spans, per_row=2)), quads)


def test_a_paragraph_across_the_page_stays_whole() -> None:
    """Lines across the page with a wide space in the same place: no column beside them."""
    quads = np.concatenate([across(row) for row in range(6)]).astype(np.float32)
    assert np.array_equal(split_at_gutters(quads, inked(two_columns(6), per_row=2)), quads)


def test_an_ink_gap_that_the_lines_around_it_cross_is_no_gutter() -> None:
    """A line with a wide space (a justified line, a form's label and value) between lines
    that run across that place: nothing beside it makes a column."""
    crossing = (300.0, 1600.0)
    image = inked([crossing, crossing, (LEFT, RIGHT_END), crossing, crossing], per_row=1)
    image[50 + 2 * STEP : 50 + 2 * STEP + LINE, GUTTER_AT : GUTTER_AT + GUTTER] = 255
    around = quads_of([crossing] * 5, per_row=1)
    quads = np.concatenate([around[:2], across(2), around[3:]]).astype(np.float32)
    assert np.array_equal(split_at_gutters(quads, image), quads)


def test_three_joined_lines_at_the_top_of_the_columns_are_all_cut() -> None:
    """The top line's neighbours are the two joined lines under it, which hide the gutter
    from it until they are cut (the next pass sees their pieces)."""
    rows = two_columns(9)
    joined = np.concatenate([across(0), across(1), across(2), quads_of(rows, 2)[6:]])
    cut = split_at_gutters(joined.astype(np.float32), inked(rows, per_row=2))
    assert len(cut) == len(joined) + 3


def test_the_columns_last_lines_joined_over_a_page_number_in_the_gutter_are_all_cut() -> None:
    """A scanned paper: the columns' last six lines all joined, a page number centred under
    the gutter. The number, a neighbour of the lowest joined lines, stood in the gutter:
    their neighbours left no strip free, and they stayed whole."""
    rows = two_columns(12)
    folio_top = 50 + STEP * 12
    folio = np.array([quad(GUTTER_AT + 5, folio_top, GUTTER_AT + GUTTER - 5, folio_top + LINE)])
    joined = np.concatenate(
        [quads_of(rows, 2)[:12], *(across(row) for row in range(6, 12)), folio]
    ).astype(np.float32)
    page = inked(rows, per_row=2)
    page[folio_top + 8 : folio_top + LINE - 8, GUTTER_AT + 15 : GUTTER_AT + GUTTER - 15] = 0
    cut = split_at_gutters(joined, page)
    assert len(cut) == len(joined) + 6


def overrun_row(left_end: float, right_start: float) -> np.ndarray:
    """Six rows of two columns whose first row's boxes end and start where asked (the left
    box running on into the right column, or the right one starting in the left's ink)."""
    quads = quads_of(two_columns(6), per_row=2)
    quads[0] = quad(LEFT - 6, 50, left_end, 50 + LINE)
    quads[1] = quad(right_start, 50, RIGHT_END + 6, 50 + LINE)
    return quads


def test_a_line_running_into_the_next_columns_first_letter_is_cut_back_to_the_gutter() -> None:
    quads = overrun_row(GUTTER_AT + GUTTER + 15, GUTTER_AT + GUTTER - 6)
    cut = split_at_gutters(quads, inked(two_columns(6), per_row=2))
    assert len(cut) == len(quads)
    # It ends in the first half of the gutter, which stays free; the right one stays.
    assert GUTTER_AT <= cut[0][:, 0].max() <= GUTTER_AT + GUTTER / 2
    assert np.array_equal(cut[1:], quads[1:])


def test_a_line_starting_in_the_last_letter_of_the_one_before_is_cut_back_to_the_gutter() -> None:
    quads = overrun_row(GUTTER_AT + 6, GUTTER_AT - 15)
    cut = split_at_gutters(quads, inked(two_columns(6), per_row=2))
    assert np.array_equal(cut[0], quads[0])
    assert GUTTER_AT + GUTTER / 2 <= cut[1][:, 0].min() <= GUTTER_AT + GUTTER
    assert cut[1][:, 0].max() == pytest.approx(RIGHT_END + 6)


def test_lines_on_a_row_whose_boxes_all_but_touch_across_a_gutter_are_cut_back() -> None:
    """Boxes padded into the gutter from both sides, 5 px apart: less than the reading order
    takes for a gutter (a quarter of a line), so it read that row across."""
    quads = overrun_row(GUTTER_AT + 20, GUTTER_AT + 25)
    cut = split_at_gutters(quads, inked(two_columns(6), per_row=2))
    free = cut[1][:, 0].min() - cut[0][:, 0].max()
    assert free >= LINE / 4
    assert cut[0][:, 0].max() >= GUTTER_AT and cut[1][:, 0].min() <= GUTTER_AT + GUTTER


def test_lines_overlapping_on_a_row_without_a_gutter_between_them_stay() -> None:
    """Two boxes of one line of type, overlapping at a word space: no gutter to cut back to."""
    spans = [(LEFT, GUTTER_AT), (GUTTER_AT + 10, RIGHT_END)] * 6  # a 10-px space, no gutter
    quads = quads_of(spans, per_row=2)
    quads[0] = quad(LEFT - 6, 50, GUTTER_AT + 30, 50 + LINE)
    assert np.array_equal(split_at_gutters(quads, inked(spans, per_row=2)), quads)


def justified_columns(gutter_px: int, seed: int = 3) -> tuple[Image.Image, str]:
    """A 300-dpi page of two columns of 10-pt sans, ``gutter_px`` apart, every line run up
    to the gutter as justified type is; and its text, the left column then the right."""
    rng = random.Random(seed)
    words = [
        "the",
        "reading",
        "room",
        "received",
        "four",
        "hundred",
        "boxes",
        "of",
        "letters",
        "invoices",
        "and",
        "contracts",
        "from",
        "the",
        "county",
        "archive",
        "which",
        "had",
        "kept",
        "them",
        "since",
        "the",
        "war",
        "in",
        "a",
        "cellar",
        "under",
        "the",
        "old",
        "town",
        "hall",
        "where",
        "damp",
        "and",
        "mice",
        "had",
        "done",
        "their",
        "work",
        "on",
        "the",
        "paper",
    ]
    font = ImageFont.truetype(str(FONT), 42)
    image = Image.new("L", (2550, 1400), 255)
    draw = ImageDraw.Draw(image)
    column = (2550 - 2 * 225 - gutter_px) // 2
    columns = []
    for index in range(2):
        x, lines = 225 + index * (column + gutter_px), []
        while len(lines) < 22:
            line = ""
            for word in (rng.choice(words) for _ in range(40)):
                trial = f"{line} {word}".strip()
                if draw.textlength(trial, font=font) > column:
                    break
                line = trial
            lines.append(line)
        for row, text in enumerate(lines):
            draw.text((x, 100 + 50 * row), text, font=font, fill=0)
        columns.append("\n".join(lines))
    return image.convert("RGB"), "\n\n".join(columns)


@pytest.fixture(scope="module")
def engine() -> EmbeddedEngine:
    return EmbeddedEngine(threads=2)


@pytest.mark.slow
def test_lines_the_detector_joined_across_a_narrow_gutter_are_read_in_their_columns(
    engine: EmbeddedEngine,
) -> None:
    """LaTeX's default gutter (10 pt) in Liberation Serif: the detector gives a line of each
    column one box now and then (this page: the first line, and two more), which was read
    across and made the page read band by band (CER 0.25)."""
    if not Path(FONT_FILE).exists():
        pytest.skip("Liberation fonts not installed (scripts/system-deps.sh installs them)")
    page, truth = two_column_page(10, seed=1)
    text = engine.recognize(page.convert("RGB")).text
    assert score_text(truth, text).cer < 0.01, text


@pytest.mark.slow
def test_justified_columns_a_narrow_gutter_apart_read_column_by_column(
    engine: EmbeddedEngine,
) -> None:
    """Every line run up to a 10-pt gutter: the detector's boxes, padded on both sides, leave
    a gap of a third of a line between the columns (the reading order wanted half a line,
    and read the page band by band: CER 0.42)."""
    if not FONT.exists():
        pytest.skip("DejaVu font not installed")
    image, truth = justified_columns(42)
    text = engine.recognize(image).text
    assert score_text(truth, text).cer < 0.01, text
