"""OTSL tables (``<fcel>``, ``<ecel>``, ``<lcel>``, ``<ucel>``, ``<xcel>``, ``<nl>``) as HTML.

PaddleOCR-VL answers ``Table Recognition:`` in OTSL, as do DocTags models. This follows
PaddleX's ``convert_otsl_to_html`` (``paddlex/inference/pipelines/paddleocr_vl/uilts.py``
at commit 2f7be6dd8b94fc8b3345a3756fc8d4429867558a): rows padded to the width that costs
the fewest cells, ``<lcel>``/``<xcel>`` to the right of a cell widen it, ``<ucel>``/``<xcel>``
below it lengthen it, cell text HTML-escaped.
"""

from __future__ import annotations

import html
import re

FCEL, ECEL, LCEL, UCEL, XCEL, NL = "<fcel>", "<ecel>", "<lcel>", "<ucel>", "<xcel>", "<nl>"
_CELL_TAGS = (FCEL, ECEL, LCEL, UCEL, XCEL)
_TAG = re.compile(r"(<fcel>|<ecel>|<lcel>|<ucel>|<xcel>|<nl>)")
_CELL = re.compile(
    r"(?:<fcel>|<ecel>|<lcel>|<ucel>|<xcel>)(?:(?!<fcel>|<ecel>|<lcel>|<ucel>|<xcel>).)*", re.S
)


def has_otsl(text: str) -> bool:
    """Whether ``text`` holds OTSL cell tags."""
    return FCEL in text or ECEL in text


def otsl_to_html(text: str) -> str:
    """The OTSL table in ``text`` as ``<table>`` HTML ("" when it holds no cell)."""
    rows = _padded_rows(text)
    grid = [[_cell_kind(cell) for cell in row] for row in rows]
    if not any(kind in (FCEL, ECEL) for row in grid for kind in row):
        return ""
    spans = {}
    for r, row in enumerate(grid):
        for c, kind in enumerate(row):
            if kind in (FCEL, ECEL):
                down = [line[c] for line in grid]
                spans[r, c] = (
                    1 + _run(down, r + 1, (UCEL, XCEL)),
                    1 + _run(row, c + 1, (LCEL, XCEL)),
                )
    covered = {
        (r + i, c + j)
        for (r, c), (rowspan, colspan) in spans.items()
        for i in range(rowspan)
        for j in range(colspan)
    }
    body = []
    for r, row in enumerate(rows):
        cells = []
        for c, cell in enumerate(row):
            if (r, c) in spans:
                rowspan, colspan = spans[r, c]
                attrs = (f' rowspan="{rowspan}"' if rowspan > 1 else "") + (
                    f' colspan="{colspan}"' if colspan > 1 else ""
                )
                content = html.escape(cell[len(FCEL) :].strip()) if grid[r][c] == FCEL else ""
                cells.append(f"<td{attrs}>{content}</td>")
            elif (r, c) not in covered:
                # A merge tag with no cell to merge into: PaddleX keeps its place empty.
                cells.append("<td></td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return "<table>" + "".join(body) + "</table>"


def _padded_rows(text: str) -> list[list[str]]:
    """The table's rows of raw cells (tag plus text), each padded or cut to one width:
    the width between the last filled cell and the longest row that changes fewest cells."""
    rows = []
    for line in text.strip().split(NL):
        cells = _CELL.findall(line)
        if cells:
            last_filled = max((i + 1 for i, c in enumerate(cells) if c.startswith(FCEL)), default=0)
            rows.append((cells, last_filled))
    if not rows:
        return []
    low = max(filled for _, filled in rows)
    high = max(low, max(len(cells) for cells, _ in rows))
    width = min(range(low, high + 1), key=lambda w: sum(abs(len(c) - w) for c, _ in rows))
    return [cells[:width] + [ECEL] * (width - len(cells)) for cells, _ in rows]


def _cell_kind(cell: str) -> str:
    return next(tag for tag in _CELL_TAGS if cell.startswith(tag))


def _run(line: list[str], start: int, kinds: tuple[str, ...]) -> int:
    """How many entries of ``line`` from ``start`` on are of ``kinds``."""
    count = 0
    while start + count < len(line) and line[start + count] in kinds:
        count += 1
    return count
