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


def page(rows: list[tuple[float, float]]) -> np.ndarray:
    """A white page with a black bar (ink) over each (x0, x1) span on row i."""
    image = np.full((STEP * len(rows) + 100, 2100, 3), 255, np.uint8)
    for i, (x0, x1) in enumerate(rows):
        top = 50 + STEP * i
        image[top + 8 : top + LINE - 8, int(x0) : int(x1)] = 0
    return image


def two_columns(lines: int) -> list[tuple[float, float]]:
    """Each row: the left column's line, then the right column's, as ink spans."""
    rows = []
    for _ in range(lines):
        rows += [(LEFT, GUTTER_AT), (GUTTER_AT + GUTTER, RIGHT_END)]
    return rows


def quads_of(spans: list[tuple[float, float]], per_row: int) -> np.ndarray:
    """The spans' boxes, ``per_row`` spans a row, padded as the detector pads them."""
    boxes = []
    for i, (x0, x1) in enumerate(spans):
        top = 50 + STEP * (i // per_row)
        boxes.append(quad(x0 - 6, top, x1 + 6, top + LINE))
    return np.array(boxes, np.float32)


def test_a_line_joined_across_the_gutter_is_cut_at_its_gap() -> None:
    rows = two_columns(6)
    image = page([(x0, x1) for x0, x1 in rows[::2]])
    image[50 : 50 + STEP * 6, :] = 255
    for i, (x0, x1) in enumerate(rows):  # both columns inked, row by row
        top = 50 + STEP * (i // 2)
        image[top + 8 : top + LINE - 8, int(x0) : int(x1)] = 0
    quads = quads_of(rows, per_row=2)
    # The detector gave the first row one box: both columns' first lines.
    joined = np.concatenate([[quad(LEFT - 6, 50, RIGHT_END + 6, 50 + LINE)], quads[2:]])
    cut = split_at_gutters(joined.astype(np.float32), image)
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
    image = page([])
    image = np.full((STEP * 6 + 100, 2100, 3), 255, np.uint8)
    for i, (x0, x1) in enumerate(rows):
        top = 50 + STEP * (i // 2)
        image[top + 8 : top + LINE - 8, int(x0) : int(x1)] = 0
    quads = quads_of(rows, per_row=2)
    across = [quad(LEFT - 6, 50 + STEP * r, RIGHT_END + 6, 50 + STEP * r + LINE) for r in (2, 3)]
    joined = np.concatenate([quads[:4], np.array(across, np.float32), quads[8:]])
    assert len(split_at_gutters(joined, image)) == len(joined) + 2


def test_a_line_inked_across_the_gutter_stays_whole() -> None:
    """A title over two columns: its neighbours leave a gutter, its ink does not."""
    rows = two_columns(5)
    image = np.full((STEP * 6 + 100, 2100, 3), 255, np.uint8)
    image[50 + 8 : 50 + LINE - 8, LEFT:RIGHT_END] = 0  # the title, inked all along
    for i, (x0, x1) in enumerate(rows):
        top = 50 + STEP * (1 + i // 2)
        image[top + 8 : top + LINE - 8, int(x0) : int(x1)] = 0
    title = np.array([quad(LEFT - 6, 50, RIGHT_END + 6, 50 + LINE)], np.float32)
    below = quads_of(rows, per_row=2)
    below[:, :, 1] += STEP
    quads = np.concatenate([title, below])
    assert np.array_equal(split_at_gutters(quads, image), quads)


def test_a_paragraph_across_the_page_stays_whole() -> None:
    """Lines across the page with a wide space in the same place: no column beside them."""
    image = np.full((STEP * 6 + 100, 2100, 3), 255, np.uint8)
    spans = [(LEFT, GUTTER_AT), (GUTTER_AT + GUTTER, RIGHT_END)] * 6
    for i, (x0, x1) in enumerate(spans):
        top = 50 + STEP * (i // 2)
        image[top + 8 : top + LINE - 8, int(x0) : int(x1)] = 0
    quads = np.array(
        [quad(LEFT - 6, 50 + STEP * r, RIGHT_END + 6, 50 + STEP * r + LINE) for r in range(6)],
        np.float32,
    )
    assert np.array_equal(split_at_gutters(quads, image), quads)


def test_a_short_line_in_a_column_is_not_looked_at() -> None:
    rows = two_columns(6)
    image = np.full((STEP * 6 + 100, 2100, 3), 255, np.uint8)
    quads = quads_of(rows, per_row=2)
    assert np.array_equal(split_at_gutters(quads, image), quads)


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
