"""Tables whose rows are told apart by ruled lines (``engines/rules.py``,
``engines/ruled_tables.py``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from ocrflow.engines.embedded import EmbeddedEngine
from ocrflow.engines.layout import TextBox, laid_out
from ocrflow.engines.ruled_tables import find_ruled_tables
from ocrflow.engines.rules import Rule, horizontal_rules

from .test_line_detection import scanned

WIDTH = 2400


def _ruled_page(tilt: float = 0.0) -> tuple[np.ndarray, list[int]]:
    """A page of text lines and, under them, four rules (one broken twice, as a faint scan
    breaks it), turned by ``tilt`` degrees; and the rules' heights before the turn."""
    page = Image.new("L", (WIDTH, 3000), 255)
    draw = ImageDraw.Draw(page)
    font = ImageFont.load_default(size=40)
    for row in range(100, 900, 60):
        draw.text((200, row), "Dense text — no letter runs long enough to be a rule", 0, font)
    heights = [1000, 1200, 1400, 1600]
    for y in heights:
        draw.line((300, y, 2100, y), fill=0, width=3)
    draw.line((900, 1200, 960, 1200), fill=255, width=3)
    draw.line((1500, 1200, 1540, 1200), fill=255, width=3)
    turned = page.rotate(tilt, resample=Image.Resampling.BILINEAR, fillcolor=255)
    return np.asarray(turned.convert("RGB"))[:, :, ::-1].copy(), heights


def test_rules_are_found_whole_and_text_is_not_a_rule() -> None:
    bgr, heights = _ruled_page()
    rules = horizontal_rules(bgr)
    assert len(rules) == len(heights)
    assert all(abs((r.y0 + r.y1) / 2 - h) <= 3 for r, h in zip(rules, heights, strict=True))
    # The broken rule is one rule, end to end.
    assert all(abs(r.x0 - 300) <= 4 and abs(r.x1 - 2100) <= 4 for r in rules)


def test_a_tilted_scan_s_rules_are_followed_along_their_slope() -> None:
    bgr, heights = _ruled_page(tilt=0.4)
    rules = horizontal_rules(bgr)
    assert len(rules) == len(heights)
    for rule in rules:
        # Turned counter-clockwise: the right end stands higher, by about tan(0.4°) of it.
        assert 9 <= rule.y0 - rule.y1 <= 16


def _box(x0: float, y0: float, text: str, width: float = 300) -> TextBox:
    return TextBox(x0, y0, x0 + width, y0 + 40, text, 0.99, 40.0)


def _certificate() -> tuple[list[TextBox], list[Rule]]:
    """Three ruled rows of a label, a description wrapped over two or three lines, and a
    value; the rows 0.3 text heights apart, as close as the lines inside a cell."""
    boxes, rules = [], [Rule(100, 90, 2100, 90)]
    top = 100
    for row, lines in enumerate((3, 2, 3)):
        boxes.append(_box(120, top + 20 * (lines - 1), f"Label{row}", 200))
        boxes += [_box(500, top + 52 * k, f"desc{row} part{k}", 1100) for k in range(lines)]
        boxes.append(_box(1800, top, f"V{row}", 60))
        top += 52 * lines + 12
        rules.append(Rule(100, top - 6, 2100, top - 6))
    return boxes, rules


def test_rows_between_rules_are_a_table_read_row_by_row() -> None:
    boxes, rules = _certificate()
    (table,) = find_ruled_tables(boxes, rules)
    assert table.rows == (
        ("Label0", "desc0 part0 desc0 part1 desc0 part2", "V0"),
        ("Label1", "desc1 part0 desc1 part1", "V1"),
        ("Label2", "desc2 part0 desc2 part1 desc2 part2", "V2"),
    )
    assert [b.text for b in table.boxes][:5] == [
        "Label0", "desc0 part0", "desc0 part1", "desc0 part2", "V0",
    ]  # fmt: skip
    text = "\n\n".join(p.text for p in laid_out(boxes, rules=rules))
    assert "| Label1 | desc1 part0 desc1 part1 | V1 |" in text
    # Without the rules the rows cannot be told apart: the page is read down its columns.
    plain = "\n\n".join(p.text for p in laid_out(boxes))
    assert plain.index("Label2") < plain.index("desc0 part0")


def test_rules_around_prose_or_one_column_make_no_table() -> None:
    boxes, rules = _certificate()
    one_column = [b for b in boxes if b.text.startswith("desc")]
    assert find_ruled_tables(one_column, rules) == []
    # Rules a page of text apart (a letterhead's and a footer's): no rows.
    far = [Rule(100, 90, 2100, 90), Rule(100, 1200, 2100, 1200), Rule(100, 2400, 2100, 2400)]
    spread = [_box(b.x0, b.y0 * 5, b.text, b.x1 - b.x0) for b in boxes]
    assert find_ruled_tables(spread, far) == []
    assert find_ruled_tables(boxes, rules[:2]) == []  # one row


def test_a_certificate_s_ruled_table_is_read_row_by_row(corpus: Path) -> None:
    scan = scanned(corpus / "pdfs" / "olmocr__lots_of_sci_tables.pdf")
    text = EmbeddedEngine(threads=1).recognize(scan).text
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    assert [row.split(" | ")[0] for row in rows if "---" not in row] == [
        "| RoHS \\| Exempt", "| RoHS", "| Halogen Free", "| REACH", "| TSCA",
    ]  # fmt: skip
    halogen = next(row for row in rows if row.startswith("| Halogen"))
    assert "restrictions. See Appendix C." in halogen and halogen.endswith("| Y |")
