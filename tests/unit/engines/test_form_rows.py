"""A form's columns of short lines are read across, row by row (``engines/form_rows.py``);
columns of prose are not."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ocrflow.engines import xycut
from ocrflow.engines.embedded import EmbeddedEngine
from ocrflow.engines.form_rows import reads_across, rows_across
from ocrflow.engines.layout import TextBox, paragraphs_in_order
from ocrflow.engines.xycut import reading_regions

from .test_line_detection import scanned

HEIGHT = 20.0


def line(x0: float, y0: float, width: float, text: str) -> TextBox:
    return TextBox(x0, y0, x0 + width, y0 + HEIGHT, text, 0.99, HEIGHT)


def form(rows: int = 8, offset: float = 0.0) -> list[TextBox]:
    """Line numbers, captions and fields' labels in three columns, row by row, 40 px
    apart; the third column moved down by ``offset``."""
    boxes = []
    for r in range(rows):
        y = 100 + 40 * r
        boxes.append(line(40, y, 30, f"L{r + 1}"))
        boxes.append(line(100, y, 140, f"caption{r}"))
        boxes.append(line(500, y + offset, 90, f"field{r}:"))
    return boxes


def test_a_form_is_read_row_by_row() -> None:
    regions = reading_regions(form())
    assert [[b.text for b in region] for region in regions][:2] == [
        ["L1", "caption0", "field0:"],
        ["L2", "caption1", "field1:"],
    ]
    assert paragraphs_in_order(form())[:2] == ["L1 caption0 field0:", "L2 caption1 field1:"]


def test_columns_of_prose_or_of_unaligned_lines_are_read_down() -> None:
    # Prose: level lines (one baseline grid), but long ones.
    prose = [line(x, 100 + 26 * r, 600, f"c{x}r{r}") for x in (40, 700) for r in range(12)]
    assert [b.text for b in reading_regions(prose)[0]][:2] == ["c40r0", "c40r1"]
    # Short lines whose columns do not stand level (two lists side by side).
    assert not reads_across([form(offset=20)[i::3] for i in range(3)], HEIGHT)
    assert reads_across([form()[i::3] for i in range(3)], HEIGHT)
    # Too few lines to tell.
    assert not reads_across([form(2)[i::3] for i in range(3)], HEIGHT)


def test_rows_are_level_lines_left_to_right() -> None:
    boxes = [line(300, 100, 50, "b"), line(40, 104, 50, "a"), line(40, 140, 50, "c")]
    assert [[b.text for b in row] for row in rows_across(boxes)] == [["a", "b"], ["c"]]


def test_a_tax_form_s_numbered_lines_are_read_with_their_captions(
    corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scan = scanned(corpus / "pdfs" / "pdfjs__160F-2019.pdf")
    engine = EmbeddedEngine(threads=1)
    text = engine.recognize(scan).text
    assert re.search(r"(?m)^12 FO t[ée]l[ée]phone:?$", text), text
    assert re.search(r"(?m)^14 CE J\) indemnisation", text), text
    # What it is for: read down its columns, the form gave its line numbers one after
    # another, away from their captions.
    monkeypatch.setattr(xycut, "reads_across", lambda columns, height: False)
    unfixed = engine.recognize(scan).text
    assert not re.search(r"(?m)^12 FO", unfixed)
    assert re.search(r"(?m)^12\n+13\n+14$", unfixed), unfixed


def test_narrow_columns_of_prose_are_not_a_form() -> None:
    # A newspaper's narrow columns on one baseline grid: short lines, but of many words.
    words = "the council met on tuesday to vote"
    prose = [line(40 + 200 * c, 100 + 26 * r, 180, words) for c in range(3) for r in range(12)]
    assert not reads_across([prose[12 * c : 12 * c + 12] for c in range(3)], HEIGHT)
    terse = [line(b.x0, b.y0, b.x1 - b.x0, "Total:") for b in prose]
    assert reads_across([terse[12 * c : 12 * c + 12] for c in range(3)], HEIGHT)
