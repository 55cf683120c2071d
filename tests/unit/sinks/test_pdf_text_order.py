"""The searchable PDF's text layer read by poppler's ``pdftotext`` in the Markdown's order
(``pdf_text_order.py`` and the word gaps of ``pdf_text_layer.py``): two columns over a
page number centred under their gutter, a table's rows, lines with wide gaps between
their words, and words whose boxes touch."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import ocrflow.sinks.pdf_text_layer as layer
import ocrflow.sinks.pdf_text_order as order
from ocrflow.document.model import Page
from ocrflow.sinks.pdf_text_order import (
    CELL_GAP,
    REACH,
    ROW_STEP,
    drawn_by_rows,
    out_of_gutters,
    side_by_side,
    table_rows,
)
from ocrflow.sinks.pdf_text_sizes import LineSpan
from ocrflow.types import Block, BlockLabel, Line, Route, Word

from .test_pdf_text_sizes import _block, pdftotext_words

needs_poppler = pytest.mark.skipif(
    shutil.which("pdftotext") is None, reason="[needs poppler] pdftotext"
)
WIDTH, HEIGHT = 612.0, 792.0
SIZE = 12.0


def two_columns_over_a_folio(folio_x: float) -> dict[int, LineSpan]:
    """A left and a right column (blocks 1 and 2) and, under them, a page number (block 3)
    at ``folio_x`` (a fraction of the width)."""
    spans = {100 + i: LineSpan(1, 0.08, 0.1 + i * 0.02, 0.45, 0.115 + i * 0.02) for i in range(10)}
    spans |= {200 + i: LineSpan(2, 0.52, 0.1 + i * 0.02, 0.9, 0.115 + i * 0.02) for i in range(10)}
    spans[300] = LineSpan(3, folio_x, 0.9, folio_x + 0.02, 0.915)
    return spans


def test_a_page_number_in_the_gutter_is_drawn_past_the_right_column_s_side() -> None:
    spans = two_columns_over_a_folio(0.475)
    drawn = out_of_gutters(spans, dict.fromkeys(spans, SIZE), (WIDTH, HEIGHT), 0.65)
    assert set(drawn) == {300}
    x0, x1 = drawn[300]
    assert x0 == spans[300].x0
    assert x1 == pytest.approx(0.52 + REACH * SIZE / WIDTH)


@pytest.mark.parametrize("folio_x", [0.3, 0.6])  # under a column, not in the gutter
def test_a_page_number_under_a_column_stays(folio_x: float) -> None:
    spans = two_columns_over_a_folio(folio_x)
    assert out_of_gutters(spans, dict.fromkeys(spans, SIZE), (WIDTH, HEIGHT), 0.65) == {}


def test_a_page_number_with_text_beside_it_stays() -> None:
    # A footer's other words on the folio's row, where it would reach: drawn wider, the
    # folio would run into them.
    spans = two_columns_over_a_folio(0.475)
    spans[400] = LineSpan(4, 0.53, 0.9, 0.7, 0.915)
    assert 300 not in out_of_gutters(spans, dict.fromkeys(spans, SIZE), (WIDTH, HEIGHT), 0.65)


def columns_with_a_heading_over_a_folio(folio_x: float) -> list[Block]:
    """A left column of a paragraph, a heading and another paragraph; a right column of one
    paragraph starting a little higher than the left one (a scan's skew); a page number
    under the gutter. Tesseract's word boxes (``_block``)."""

    def rows(name: str, count: int) -> list[list[tuple[str, float]]]:
        return [[(f"{name}{i}w{j}", 0.0105) for j in range(4)] for i in range(count)]

    return [
        _block(rows("La", 4), 0.08, 0.100),
        _block([[("Lhead", 0.0105)]], 0.08, 0.170),
        _block(rows("Lb", 5), 0.08, 0.200),
        _block(rows("R", 12), 0.52, 0.099),
        _block([[("7", 0.0105)]], folio_x, 0.40),
    ]


@needs_poppler
def test_pdftotext_reads_columns_over_a_page_number_in_the_gutter_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocks = columns_with_a_heading_over_a_folio(0.36)
    written, read = pdftotext_words(blocks, tmp_path)
    assert read == written
    # What it is for: drawn where printed, the folio widens both columns into the gutter,
    # and poppler reads the right column (a point higher) before the left one's second half.
    monkeypatch.setattr(layer, "out_of_gutters", lambda *args: {})
    _, unfixed = pdftotext_words(blocks, tmp_path)
    assert unfixed.index("R0w0") < unfixed.index("Lb0w0")


def table(rows: int, jitter: float, tops: tuple[float, ...] = ()) -> Block:
    """A table block of ``rows`` rows of three cells, the cells of a row up to ``jitter``
    apart down the page (a detector's boxes), each cell one line of one word; rows 0.025
    of the page apart, or at ``tops``."""
    lines = []
    for r in range(rows):
        for c, x in enumerate((0.1, 0.4, 0.7)):
            top = (tops[r] if tops else 0.2 + r * 0.025) + (jitter if c == 1 else 0.0)
            text = f"r{r}c{c}"
            box = (x, top, x + 0.05, top + 0.012)
            lines.append(Line(text, box, 0.9, (Word(text, box, 0.9),)))
    text = "\n".join(" | ".join(f"r{r}c{c}" for c in range(3)) for r in range(rows))
    return Block(BlockLabel.TABLE, text, None, 0.9, tuple(lines))


def test_a_table_s_cells_are_drawn_row_by_row() -> None:
    cells = {
        i: LineSpan(7, line.bbox[0], line.bbox[1], line.bbox[2], line.bbox[3])  # type: ignore[index]
        for i, line in enumerate(table(3, 0.004).lines)
    }
    middles, across, sizes = table_rows(cells, {7}, dict.fromkeys(cells, SIZE), (WIDTH, HEIGHT))
    assert sizes == dict.fromkeys(cells, SIZE)  # rows 20 pt apart: drawn at their size
    for row in range(3):
        assert len({middles[3 * row + c] for c in range(3)}) == 1  # one baseline a row
        assert 3 * row + 2 not in across  # the last cell keeps its box
        for c in range(2):
            x0, x1 = across[3 * row + c]
            assert x0 == cells[3 * row + c].x0
            assert x1 == pytest.approx(cells[3 * row + c + 1].x0 - CELL_GAP * SIZE / WIDTH)
    assert table_rows(cells, set(), dict.fromkeys(cells, SIZE), (WIDTH, HEIGHT))[:2] == ({}, {})


def staggered_header() -> Block:
    """A results table (its boxes as the embedded engine found them on a scan): the
    header's second row ("r1c…", second lines of cells) stands 0.004 of the page over the
    third ("r2c…", column heads), which ends left of it; then a row of figures."""
    cells = [
        ("r0c0", 0.26, 0.4287), ("r0c1", 0.338, 0.4287), ("r0c2", 0.529, 0.4275),
        ("r0c3", 0.645, 0.4262), ("r0c4", 0.702, 0.4262),
        ("r1c0", 0.39, 0.435), ("r1c1", 0.644, 0.4412), ("r1c2", 0.696, 0.4415),
        ("r2c0", 0.234, 0.4468), ("r2c1", 0.312, 0.4465), ("r2c2", 0.467, 0.4443),
        ("r2c3", 0.522, 0.4453), ("r2c4", 0.602, 0.4443),
    ]  # fmt: skip
    cells += [(f"r3c{c}", 0.234 + 0.1 * c, 0.4687) for c in range(5)]
    lines = []
    for text, x, top in cells:
        box = (x, top, x + 0.04, top + 0.016)
        lines.append(Line(text, box, 0.9, (Word(text, box, 0.9),)))
    return Block(BlockLabel.TABLE, " ".join(c[0] for c in cells), None, 0.9, tuple(lines))


def test_rows_closer_than_poppler_tells_apart_are_drawn_smaller() -> None:
    cells = {
        i: LineSpan(7, line.bbox[0], line.bbox[1], line.bbox[2], line.bbox[3])  # type: ignore[index]
        for i, line in enumerate(staggered_header().lines)
    }
    middles, _, sizes = table_rows(cells, {7}, dict.fromkeys(cells, SIZE), (WIDTH, HEIGHT))
    step = (middles[8] - middles[5]) * HEIGHT
    assert step < SIZE / 2
    # Rows 1 and 2 under half a size apart: both drawn at ROW_STEP of their step.
    assert all(sizes[i] == pytest.approx(step / ROW_STEP) for i in range(5, 13))
    assert all(sizes[i] == SIZE for i in range(13, 18))


@needs_poppler
def test_pdftotext_reads_a_staggered_header_row_by_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    block = staggered_header()
    written, read = pdftotext_words([block], tmp_path)
    assert read == written
    # What it is for: drawn at their own size, poppler takes rows 1 and 2 for one line and
    # reads the column heads before the header's second line.
    monkeypatch.setattr(order, "ROW_STEP", 1e-9)
    _, unfixed = pdftotext_words([block], tmp_path)
    assert unfixed.index("r2c4") < unfixed.index("r1c1")


@needs_poppler
def test_pdftotext_reads_lines_with_wide_gaps_whole(tmp_path: Path) -> None:
    # Tesseract reads a table's rows as lines: each row one line of words far apart.
    lines = []
    for r in range(4):
        top = 0.2 + r * 0.025
        words = tuple(
            Word(f"r{r}c{c}", (x, top, x + 0.05, top + 0.012), 0.9)
            for c, x in enumerate((0.1, 0.4, 0.7))
        )
        lines.append(
            Line(" ".join(w.text for w in words), (0.1, top, 0.75, top + 0.012), 0.9, words)
        )
    block = Block(BlockLabel.TEXT, "\n".join(line.text for line in lines), None, 0.9, tuple(lines))
    written, read = pdftotext_words([block], tmp_path)
    assert read == written


@needs_poppler
def test_pdftotext_reads_words_whose_boxes_touch_apart(tmp_path: Path) -> None:
    # A comma boxed into the next word (Tesseract on a noisy scan): ",Mason" before.
    words = (
        Word("Bebenita", (0.10, 0.2, 0.20, 0.212), 0.9),
        Word(",", (0.199, 0.2, 0.206, 0.212), 0.9),
        Word("Mason", (0.205, 0.2, 0.27, 0.212), 0.9),
    )
    line = Line("Bebenita , Mason", (0.1, 0.2, 0.27, 0.212), 0.9, words)
    written, read = pdftotext_words(
        [Block(BlockLabel.TEXT, line.text, None, 0.9, (line,))], tmp_path
    )
    assert read == written


def test_cells_boxed_with_no_width_get_a_layer() -> None:
    # A VLM's table cells may come as points: no division by their width.
    lines = [
        Line(f"c{c}", (x, 0.2, x, 0.212), 0.9, (Word(f"c{c}", (x, 0.2, x, 0.212), 0.9),))
        for c, x in enumerate((0.1, 0.4, 0.7))
    ]
    block = Block(BlockLabel.TABLE, "c0 | c1 | c2", None, 0.9, tuple(lines))
    page = Page(1, block.text, Route.ENGINE, blocks=(block,))
    frame = layer.PageFrame((0, 0, WIDTH, HEIGHT))
    drawn = layer.text_layer(page, frame, "F", lambda text: text.encode("utf-16-be").hex())
    # The first two reach to the next cell; the last, of no width, is not drawn (as any
    # word of no width).
    assert drawn.count(b"> Tj") == 2 and b"<00630030> Tj" in drawn


def test_words_of_lines_with_no_height_are_skipped_not_divided_by() -> None:
    # A VLM's lines boxed with no height get size 0: no gap is measured in their sizes.
    words = tuple(Word(f"w{i}", (0.1 + 0.1 * i, 0.2, 0.15 + 0.1 * i, 0.2), 0.9) for i in range(3))
    line = Line("w0 w1 w2", (0.1, 0.2, 0.35, 0.2), 0.9, words)
    page = Page(
        1, line.text, Route.ENGINE, blocks=(Block(BlockLabel.TEXT, line.text, None, 0.9, (line,)),)
    )
    frame = layer.PageFrame((0, 0, WIDTH, HEIGHT))
    assert layer.text_layer(page, frame, "F", lambda text: text.encode("utf-16-be").hex()) == b""


def wrapped_cells() -> Block:
    """A table ruled between rows of a label, a description wrapped over three lines and
    a value (``engines/ruled_tables.py``): more lines than its Markdown has cells."""
    lines, rows = [], []
    for r in range(3):
        top = 0.2 + r * 0.08
        cells = [(f"Label{r}", 0.08, top + 0.02)]
        # Each line a little right of the one above (a tilted scan, a detector's jitter).
        cells += [(f"desc{r}x{k} goes on", 0.25 + 0.002 * k, top + 0.02 * k) for k in range(3)]
        cells += [(f"V{r}", 0.8, top)]
        for text, x, y in cells:
            parts = text.split()
            spans = [(x + 0.06 * i, x + 0.06 * i + 0.05) for i in range(len(parts))]
            words = tuple(
                Word(w, (x0, y, x1, y + 0.014), 0.9)
                for w, (x0, x1) in zip(parts, spans, strict=True)
            )
            lines.append(Line(text, (x, y, spans[-1][1], y + 0.014), 0.9, words))
        rows.append(f"| Label{r} | {' '.join(f'desc{r}x{k} goes on' for k in range(3))} | V{r} |")
    markdown = "\n".join([rows[0], "| --- | --- | --- |", *rows[1:]])
    return Block(BlockLabel.TABLE, markdown, None, 0.9, tuple(lines))


def _spans(block: Block, number: int) -> dict[int, LineSpan]:
    return {
        100 * number + i: LineSpan(number, *line.bbox)  # type: ignore[misc]
        for i, line in enumerate(block.lines)
    }


def test_a_table_of_one_line_cells_is_drawn_by_rows_and_one_of_wrapped_cells_is_not() -> None:
    spans = _spans(table(3, 0.004), 1) | _spans(wrapped_cells(), 2) | _spans(staggered_header(), 3)
    assert drawn_by_rows(spans, {1, 2, 3}) == {1, 3}
    assert drawn_by_rows(spans, {2}) == set()


@needs_poppler
def test_pdftotext_reads_the_lines_of_wrapped_cells_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, read = pdftotext_words([wrapped_cells()], tmp_path)
    text = " ".join(read)
    # Each printed line of a description comes out whole, the rows one after another.
    for r in range(3):
        for k in range(3):
            assert f"desc{r}x{k} goes on" in text
    assert text.index("desc0x2") < text.index("Label1") < text.index("desc1x2") < text.index("V2")
    # What it is for: drawn as rows, a cell's lines fall on one baseline, word over word.
    monkeypatch.setattr(layer, "drawn_by_rows", lambda spans, tables: tables)
    _, unfixed = pdftotext_words([wrapped_cells()], tmp_path)
    assert "desc0x0 goes on" not in " ".join(unfixed)


def form_rows() -> list[Block]:
    """Eight rows of a form read across (``engines/form_rows.py``): a block a row of a line
    number, a caption and a field's label, far apart; the rows 1.4 sizes apart, close enough
    for poppler to make a block of each column."""
    blocks = []
    for r in range(8):
        top, lines = 0.2 + 0.02 * r, []
        for text, x in ((f"L{r}", 0.08), (f"caption{r}", 0.15), (f"field{r}", 0.6)):
            box = (x, top, x + 0.08, top + 0.014)
            lines.append(Line(text, box, 0.9, (Word(text, box, 0.9),)))
        blocks.append(
            Block(BlockLabel.TEXT, " ".join(ln.text for ln in lines), None, 0.9, tuple(lines))
        )
    return blocks


def test_blocks_of_lines_side_by_side_are_rows() -> None:
    spans: dict[int, LineSpan] = {}
    for number, block in enumerate([*form_rows(), wrapped_cells()]):
        spans |= _spans(block, number)
    assert side_by_side(spans) == set(range(8))


@needs_poppler
def test_pdftotext_reads_a_form_row_by_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    written, read = pdftotext_words(form_rows(), tmp_path)
    assert read == written
    # What it is for: drawn where printed, poppler reads the captions' column first.
    monkeypatch.setattr(layer, "side_by_side", lambda spans: set())
    _, unfixed = pdftotext_words(form_rows(), tmp_path)
    assert unfixed.index("caption7") < unfixed.index("field0")
