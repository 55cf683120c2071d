"""Reading order of whole pages (XY-cut with columns, furniture, deskew) and tables, from
synthetic line boxes, a page typeset with PIL, and the sample invoice."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from PIL import Image, ImageDraw, ImageFont

from ocrflow.engines.embedded import EmbeddedEngine
from ocrflow.engines.layout import TextBox, deskew, layout_text, paragraphs_in_order
from ocrflow.engines.tables import find_tables
from ocrflow.evaluation.bench import parse_test

HEIGHT = 20.0
LEADING = 26.0
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
FONT = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")


def line(x0: float, y0: float, x1: float, text: str) -> TextBox:
    """A level text line ``HEIGHT`` px high."""
    return TextBox(x0, y0, x1, y0 + HEIGHT, text, 0.99, HEIGHT)


def column(x0: float, x1: float, y0: float, name: str, paragraphs: int = 3) -> list[TextBox]:
    """Paragraphs of four lines (the last one short), one line gap between paragraphs."""
    boxes, y = [], y0
    for p in range(paragraphs):
        for i in range(4):
            right = x1 if i < 3 else x0 + (x1 - x0) / 3
            boxes.append(line(x0, y, right, f"{name}{p + 1}.{i + 1}"))
            y += LEADING
        y += LEADING
    return boxes


def two_column_page() -> list[TextBox]:
    """Running header (left and right), a full-width title, two columns whose paragraph
    gaps line up (the case plain XY-cut reads across) and a centred page number."""
    header = [line(100, 40, 400, "Journal-of-Tests"), line(1000, 40, 1100, "Vol.3")]
    title = [line(100, 120, 1100, "Title-across-both-columns")]
    left, right = column(100, 580, 180, "L"), column(620, 1100, 180, "R")
    footer = [line(580, 1500, 620, "17")]
    return footer + right + title + left + header


def test_two_columns_read_header_title_left_right_footer() -> None:
    order = layout_text(two_column_page()).split()
    body = [w for w in order if w[0] in "LR"]
    assert order[:3] == ["Journal-of-Tests", "Vol.3", "Title-across-both-columns"]
    assert body == sorted(body, key=lambda w: (w[0] != "L", w))  # all of L, then all of R
    assert order[-1] == "17"


def test_the_former_order_puts_the_page_number_mid_text() -> None:
    # What issue 11 reported: the centred page number, left of column two, came before it.
    order = layout_text(two_column_page(), reading_order="blocks").split()
    assert order[-1] != "17"
    assert order.index("17") < order.index("R1.1")


def test_paragraphs_of_a_column_stay_paragraphs() -> None:
    paragraphs = paragraphs_in_order(column(100, 580, 100, "P"))
    assert paragraphs == [f"P{p}.1\nP{p}.2\nP{p}.3\nP{p}.4" for p in (1, 2, 3)]


def test_a_column_that_ends_early_does_not_split_the_other() -> None:
    left, right = column(100, 580, 100, "L", 4), column(620, 1100, 100, "R", 1)
    order = layout_text(right + left).split()
    assert order == [b.text for b in left] + [b.text for b in right]


def columns_then(tail_gap: float, after_gap: float) -> tuple[list[TextBox], list[TextBox]]:
    """Two columns ending level, a short line under the first after ``tail_gap`` and a
    full-width paragraph ``after_gap`` under that line (the linn brochure's "Additional
    Features": the heading of the list across the page under both columns)."""
    left, right = column(100, 580, 100, "L", 2), column(620, 1100, 100, "R", 2)
    y = max(b.y1 for b in left) + tail_gap
    heading = [line(100, y, 300, "Heading")]
    y += HEIGHT + after_gap
    after = [line(100, y + i * LEADING, 1100, f"A{i}") for i in range(3)]
    return left + right, heading + after


def test_a_heading_under_level_columns_is_read_after_them() -> None:
    columns, rest = columns_then(tail_gap=HEIGHT, after_gap=2)
    order = layout_text(rest + columns).split()
    assert order == [b.text for b in columns] + [b.text for b in rest]


@pytest.mark.parametrize(("tail_gap", "after_gap"), [(2, 2), (HEIGHT, 3 * HEIGHT)])
def test_a_last_line_close_to_its_column_stays_in_it(tail_gap: float, after_gap: float) -> None:
    # Set as the column's lines are (no gap above), or nearer to the column than to what
    # follows: the first column's last line, read before the second column.
    columns, rest = columns_then(tail_gap, after_gap)
    order = layout_text(rest + columns).split()
    left = [b.text for b in columns if b.text.startswith("L")]
    assert order[: len(left) + 1] == [*left, "Heading"]


def turned(box: TextBox, degrees: float) -> TextBox:
    """``box`` as a scanner tilted by ``degrees`` about the origin would give it."""
    a = math.radians(degrees)
    corners = [(box.x0, box.y0), (box.x1, box.y0), (box.x1, box.y1), (box.x0, box.y1)]
    quad = [
        (x * math.cos(a) - y * math.sin(a), x * math.sin(a) + y * math.cos(a)) for x, y in corners
    ]
    return TextBox.from_quad(quad, box.text, box.score)


@pytest.mark.parametrize("degrees", [-2.5, 1.5])
def test_a_skewed_two_column_page_is_levelled_first(degrees: float) -> None:
    level = two_column_page()
    skewed = [turned(box, degrees) for box in level]
    assert deskew(skewed)[0].angle == pytest.approx(0.0, abs=1e-6)
    assert layout_text(skewed) == layout_text(level)


def grid(rows: list[list[str]], x: list[float], y0: float = 300) -> list[TextBox]:
    """A table's cells as the detector boxes them: one box a cell, left-aligned at ``x``."""
    return [
        line(x[c], y0 + r * LEADING, x[c] + 12 * len(text), text)
        for r, row in enumerate(rows)
        for c, text in enumerate(row)
    ]


def test_a_grid_of_boxes_becomes_a_markdown_table() -> None:
    rows = [["Part", "Qty", "Price"], ["Bolt", "12", "0.40"], ["Nut", "30", "0.10"]]
    above = [line(100, 200, 900, "Parts ordered in March, with prices per piece in euro.")]
    below = [line(100, 450, 900, "Prices include tax and are valid until the end of May.")]
    text = layout_text(below + grid(rows, [100, 300, 450]) + above)
    assert text.split("\n\n") == [
        above[0].text,
        "| Part | Qty | Price |\n| --- | --- | --- |\n| Bolt | 12 | 0.40 |\n| Nut | 30 | 0.10 |",
        below[0].text,
    ]
    test = parse_test(
        {"pdf": "t.pdf", "page": 1, "id": "t", "type": "table", "cell": "30",
         "top_heading": "Qty", "left": "Nut", "up": "12"}
    )  # fmt: skip
    assert test.check(text) == (True, "")


def test_a_key_value_form_is_a_two_column_table() -> None:
    rows = [["Name", "Ada Lovelace"], ["Born", "1815"], ["Field", "Mathematics"]]
    (table,) = find_tables(grid(rows, [100, 300]))
    assert table.rows == tuple(tuple(r) for r in rows)


def test_a_paragraph_line_beside_a_side_box_table_stays_out_of_it() -> None:
    """An infobox's key-value table beside a column of prose: a value that wraps onto a
    row with no key sits at the height of the column's last line, two cells as the table
    has columns. That line is far off the key column, so it stays in its paragraph and
    the table goes on (it had been made the empty key's cell)."""
    rows = [["Reign", "959-975"], ["Born", "943"], ["Spouses", "Aethelflaed"], ["", "Wulfthryth"]]
    rows += [["Issue", "Edward"], ["House", "Wessex"]]
    table_boxes = [
        line(x, 300 + r * LEADING, x + 12 * len(text), text)
        for r, row in enumerate(rows)
        for x, text in zip([700, 820], row, strict=True)
        if text
    ]
    prose = [line(100, 300 + r * LEADING, 560, f"prose line {r} of the column") for r in range(3)]
    prose.append(line(100, 300 + 3 * LEADING, 200, "of the law."))
    (table,) = find_tables(table_boxes + prose)
    assert table.rows == tuple(tuple(r) for r in rows)
    assert all(b.x0 >= 700 for b in table.boxes)


def test_two_columns_of_prose_are_not_a_table() -> None:
    boxes = column(100, 580, 100, "L") + column(620, 1100, 100, "R")
    assert find_tables(boxes) == []
    assert "|" not in layout_text(boxes)


def test_numbers_the_detector_joined_are_split_into_their_cells() -> None:
    rows = [["Item", "Qty", "Price"], ["Boxes", "40", "160.00"], ["Scans", "2500", "375.00"]]
    boxes = grid(rows, [100, 300, 400])
    joined = [b for b in boxes if b.text not in {"40", "160.00"}]
    joined.append(line(300, 300 + LEADING, 472, "40 160.00"))
    assert "| Boxes | 40 | 160.00 |" in layout_text(joined)


@pytest.mark.slow
def test_a_typeset_two_column_page_reads_in_order(engine: EmbeddedEngine) -> None:
    """A page drawn with PIL: header, two columns of lines in step, footer."""
    if not FONT.exists():
        pytest.skip("DejaVu font not installed")
    font = ImageFont.truetype(str(FONT), 26)
    image = Image.new("L", (1200, 900), 255)
    draw = ImageDraw.Draw(image)
    draw.text((80, 40), "Weekly Gazette", font=font, fill=0)
    left = ["alpha river stone and the valley", "bravo maple cloud over a town"]
    left.append("charlie amber field in the sun")
    right = ["delta copper lake near the hills", "echo silver pine by the road"]
    right.append("foxtrot marble hill at night")
    for i, (a, b) in enumerate(zip(left, right, strict=True)):
        draw.text((80, 160 + 50 * i), a, font=font, fill=0)
        draw.text((640, 160 + 50 * i), b, font=font, fill=0)
    draw.text((580, 820), "Page 4", font=font, fill=0)
    text = engine.recognize(image.convert("RGB")).text
    expected = ["Weekly Gazette", *left, *right, "Page 4"]
    positions = [text.find(part) for part in expected]
    assert -1 not in positions, text
    assert positions == sorted(positions), text


@pytest.fixture(scope="module")
def engine() -> EmbeddedEngine:
    return EmbeddedEngine(threads=1)


@pytest.mark.slow
def test_the_sample_invoice_reads_as_a_markdown_table(engine: EmbeddedEngine) -> None:
    with Image.open(EXAMPLES / "invoice-photo.jpg") as photo:
        text = engine.recognize(photo.convert("RGB")).text
    assert "| Item | Qty | Price |\n| --- | --- | --- |" in text
    assert "| Archival boxes, acid free | 40 | 160.00 |" in text
    assert "| Scanning service, per page | 2500 | 375.00 |" in text
    assert text.index("Bill to:") < text.index("| Item |") < text.index("Total due")


def test_a_date_centred_over_two_columns_is_read_before_them() -> None:
    # A paper's title and date centred over the page, then a short "Abstract" heading
    # beside the right column's first line: the gap between those two is wide, and the
    # date, standing in part of it, was taken into the columns' section and read after
    # the heading (the title too: "Abstract" came first of all).
    boxes = [line(400, 50, 800, "Title of the paper"), line(540, 90, 660, "January 3, 2024")]
    boxes.append(line(100, 140, 190, "Abstract"))
    boxes += [line(620, 140 + 26 * i, 1100, f"right{i} lorem ipsum dolor sit") for i in range(12)]
    boxes += [line(100, 172 + 26 * i, 580, f"left{i} lorem ipsum dolor sit") for i in range(11)]
    paragraphs = paragraphs_in_order(boxes)
    assert paragraphs[:3] == ["Title of the paper", "January 3, 2024", "Abstract"]
    assert paragraphs[3].startswith("left0") and paragraphs[4].startswith("right0")
