"""Our table blocks (a Markdown pipe table or an HTML ``<table>``) as a grid of cells.

Pure functions, standard library only: ``docling_build`` turns the grid into docling's
``TableData``. Pipe tables: the row before the separator row is the header. HTML: ``th``
cells and rows in ``thead`` are headers; ``rowspan``/``colspan`` take several grid slots.
Only the outermost table of the text is read (a nested table's text joins its cell).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from html.parser import HTMLParser

_RULE_CELL = re.compile(r"^:?-{1,}:?$")
_PIPE_SPLIT = re.compile(r"(?<!\\)\|")


@dataclass(frozen=True, slots=True)
class GridCell:
    """One cell placed on the grid: its top-left slot, spans, text and header flag."""

    row: int
    col: int
    text: str
    row_span: int = 1
    col_span: int = 1
    header: bool = False


@dataclass(frozen=True, slots=True)
class Grid:
    """A table's cells and its size in slots."""

    cells: tuple[GridCell, ...]
    rows: int
    cols: int


@dataclass(frozen=True, slots=True)
class _Spec:
    text: str
    row_span: int = 1
    col_span: int = 1
    header: bool = False


def parse_table(text: str) -> Grid | None:
    """The grid of a table block's text (HTML when it holds a ``<table``, else a pipe
    table); ``None`` when no cell is found."""
    rows = _html_rows(text) if "<table" in text.lower() else _pipe_rows(text)
    return place(rows) if any(rows) else None


def place(rows: list[list[_Spec]]) -> Grid:
    """Lay rows of cells on a grid: spans from rows above push later cells right."""
    taken: set[tuple[int, int]] = set()
    cells: list[GridCell] = []
    for r, specs in enumerate(rows):
        col = 0
        for spec in specs:
            while (r, col) in taken:
                col += 1
            cells.append(GridCell(r, col, spec.text, spec.row_span, spec.col_span, spec.header))
            taken.update(
                (rr, cc)
                for rr in range(r, r + spec.row_span)
                for cc in range(col, col + spec.col_span)
            )
            col += spec.col_span
    n_rows = max((c.row + c.row_span for c in cells), default=0)
    n_cols = max((c.col + c.col_span for c in cells), default=0)
    return Grid(tuple(cells), n_rows, n_cols)


# -- pipe tables ------------------------------------------------------------------------


def _split(line: str) -> list[str]:
    cells = [c.strip().replace("\\|", "|") for c in _PIPE_SPLIT.split(line.strip())]
    if cells and not cells[0] and line.strip().startswith("|"):
        cells = cells[1:]
    if cells and not cells[-1] and line.strip().endswith("|"):
        cells = cells[:-1]
    return cells


def _is_rule(cells: list[str]) -> bool:
    return bool(cells) and all(_RULE_CELL.match(c.replace(" ", "")) for c in cells)


def _pipe_rows(text: str) -> list[list[_Spec]]:
    lines = [_split(line) for line in text.splitlines() if "|" in line]
    rule = next((i for i, cells in enumerate(lines) if _is_rule(cells)), None)
    return [
        [_Spec(c, header=rule is not None and i < rule) for c in cells]
        for i, cells in enumerate(lines)
        if i != rule and cells and not _is_rule(cells)
    ]


# -- HTML tables ------------------------------------------------------------------------


def _span(value: str | None) -> int:
    try:
        return max(1, min(int(value or 1), 1000))  # a hostile span must not explode the grid
    except ValueError:
        return 1


class _TableParser(HTMLParser):
    """Rows of the first (outermost) table's cells."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.rows: list[list[_Spec]] = []
        self.depth = 0  # table nesting
        self.done = False
        self.in_head = False
        self.cell: _Spec | None = None  # the open cell, its text still in ``parts``
        self.parts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self.done:
            return
        if tag == "table":
            self.depth += 1
        elif self.depth != 1:
            return
        elif tag == "thead":
            self.in_head = True
        elif tag == "tr":
            self._close_cell()
            self.rows.append([])
        elif tag in ("td", "th"):
            self._close_cell()
            if not self.rows:
                self.rows.append([])
            named = dict(attrs)
            spans = _span(named.get("rowspan")), _span(named.get("colspan"))
            self.cell = _Spec("", *spans, header=tag == "th" or self.in_head)
            self.parts = []
        elif tag == "br" and self.cell is not None:
            self.parts.append(" ")

    def handle_endtag(self, tag: str) -> None:
        if self.done:
            return
        if tag == "table":
            self.depth -= 1
            if self.depth == 0:
                self._close_cell()
                self.done = True
        elif self.depth == 1 and tag == "thead":
            self.in_head = False
        elif self.depth == 1 and tag in ("td", "th", "tr"):
            self._close_cell()

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.parts.append(data)

    def _close_cell(self) -> None:
        if self.cell is None:
            return
        text = " ".join("".join(self.parts).split())
        self.rows[-1].append(dataclasses.replace(self.cell, text=text))
        self.cell, self.parts = None, []


def _html_rows(text: str) -> list[list[_Spec]]:
    parser = _TableParser()
    parser.feed(text)
    parser.close()
    parser._close_cell()  # a cut-off reply: keep its last cell
    return [row for row in parser.rows if row]
