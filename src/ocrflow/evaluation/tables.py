"""Tables found in Markdown output, as grids of cells with neighbour relations.

Same parsing rules as the reference benchmark (olmocr/bench/table_parsing.py): pipe tables
(first row and first column count as headings) and HTML ``<table>`` elements (``th`` cells
and rows inside ``thead`` are headings; ``rowspan``/``colspan`` occupy several grid slots).
A cell's neighbours are the nearest other cells in each direction, several where spans make
the edge ragged. HTML is read with the standard library's parser.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ocrflow.evaluation.htmltree import Node, parse_html

Cell = tuple[int, int]


@dataclass(frozen=True)
class CellSpec:
    """One cell as written: its text, spans and whether it is a heading."""

    text: str
    rowspan: int = 1
    colspan: int = 1
    heading: bool = False


@dataclass(frozen=True)
class Table:
    """A parsed table: cell texts by (row, col) of their top-left slot, and relations."""

    cells: dict[Cell, str]
    headings: frozenset[Cell]
    up: dict[Cell, set[Cell]] = field(default_factory=dict)
    down: dict[Cell, set[Cell]] = field(default_factory=dict)
    left: dict[Cell, set[Cell]] = field(default_factory=dict)
    right: dict[Cell, set[Cell]] = field(default_factory=dict)

    def top_headings(self, cell: Cell) -> set[Cell]:
        """Heading cells above ``cell`` (or the top edge cells when none is a heading)."""
        return self._walk(cell, self.up)

    def left_headings(self, cell: Cell) -> set[Cell]:
        """Heading cells left of ``cell`` (or the left edge cells when none is a heading)."""
        return self._walk(cell, self.left)

    def _walk(self, start: Cell, relation: dict[Cell, set[Cell]]) -> set[Cell]:
        headings, ends, seen, todo = set(), set(), set(), {start}
        while todo:
            cur = todo.pop()
            seen.add(cur)
            if cur in self.headings:
                headings.add(cur)
            if relation.get(cur):
                todo |= relation[cur] - seen
            else:
                ends.add(cur)
        headings.discard(start)
        ends.discard(start)
        return headings or ends


def _place_cells(rows: list[list[CellSpec]]) -> tuple[list[list[Cell | None]], dict, dict]:
    """Lay the cells on a grid: which cell occupies each (row, col) slot."""
    texts: dict[Cell, str] = {}
    spans: dict[Cell, CellSpec] = {}
    grid: list[list[Cell | None]] = []
    pending: list[tuple[Cell, int] | None] = []  # per column: a rowspan still running
    for r, specs in enumerate(rows):
        row: list[Cell | None] = []
        queue = list(specs)
        col = 0
        while queue or col < len(pending):
            running = pending[col] if col < len(pending) else None
            if running is not None:
                owner, left = running
                row.append(owner)
                pending[col] = (owner, left - 1) if left > 1 else None
                col += 1
                continue
            if not queue:
                row.append(None)
                col += 1
                continue
            spec = queue.pop(0)
            cell = (r, col)
            texts[cell], spans[cell] = spec.text, spec
            pending.extend([None] * (col + spec.colspan - len(pending)))
            for c in range(col, col + spec.colspan):
                row.append(cell)
                pending[c] = (cell, spec.rowspan - 1) if spec.rowspan > 1 else None
            col += spec.colspan
        grid.append(row)
    while any(p is not None for p in pending):  # rowspans that run past the last row
        row = []
        for c, p in enumerate(pending):
            row.append(p[0] if p else None)
            pending[c] = (p[0], p[1] - 1) if p and p[1] > 1 else None
        grid.append(row)
    return grid, texts, spans


def _neighbours(grid, cell: Cell, spec: CellSpec, step: tuple[int, int]) -> set[Cell]:
    """Nearest other cell in direction ``step`` from each slot along the cell's edge."""
    r0, c0 = cell
    dr, dc = step
    height, width = len(grid), len(grid[0])
    if dc:
        lanes = [(r, c0 + spec.colspan - 1 if dc > 0 else c0) for r in range(r0, r0 + spec.rowspan)]
    else:
        lanes = [(r0 + spec.rowspan - 1 if dr > 0 else r0, c) for c in range(c0, c0 + spec.colspan)]
    found: set[Cell] = set()
    for r, c in lanes:
        r, c = r + dr, c + dc
        while 0 <= r < height and 0 <= c < width:
            other = grid[r][c]
            if other is not None and other != cell:
                found.add(other)
                break
            r, c = r + dr, c + dc
    return found


def build_table(rows: list[list[CellSpec]]) -> Table | None:
    """Build a :class:`Table` from rows of cell specs (``None`` when it has no cells)."""
    grid, texts, spans = _place_cells(rows)
    if not texts:
        return None
    width = 1 + max((c for row in grid for c, v in enumerate(row) if v is not None), default=-1)
    grid = [(row + [None] * width)[:width] for row in grid]
    rel = {
        name: {cell: _neighbours(grid, cell, spans[cell], step) for cell in texts}
        for name, step in (("up", (-1, 0)), ("down", (1, 0)), ("left", (0, -1)), ("right", (0, 1)))
    }
    headings = frozenset(cell for cell, spec in spans.items() if spec.heading)
    return Table(cells=texts, headings=headings, **rel)


def _split_pipe_row(line: str) -> list[str]:
    cells = [cell.strip() for cell in line.split("|")]
    if cells and cells[0] == "":
        cells = cells[1:]
    if cells and cells[-1] == "":
        cells = cells[:-1]
    return cells


def _pipe_rows(lines: list[str]) -> list[list[str]]:
    """Rows of one block of pipe lines, without the first separator and rule-only lines."""
    bare = [line.replace("|", "").strip() for line in lines]
    separator = next((i for i, s in enumerate(bare) if s and set(s) <= set("- :")), None)
    rows = []
    for i, line in enumerate(lines):
        if i == separator or (line.strip() and set(line) <= set("- :|")):
            continue
        if cells := _split_pipe_row(line):
            rows.append(cells)
    return rows


def _pipe_table(lines: list[str]) -> Table | None:
    rows = _pipe_rows(lines)
    specs = [
        [CellSpec(text, heading=r == 0 or c == 0) for c, text in enumerate(row)]
        for r, row in enumerate(rows)
    ]
    return build_table(specs) if specs else None


def parse_markdown_tables(text: str) -> list[Table]:
    """Pipe tables: runs of at least two consecutive lines that contain a ``|``."""
    tables: list[Table] = []
    block: list[str] = []
    for line in [*text.strip().split("\n"), ""]:
        if "|" in line:
            block.append(line)
            continue
        if len(block) >= 2 and (table := _pipe_table(block)):
            tables.append(table)
        block = []
    return tables


def _span(value: str | None, rows_left: int) -> int:
    if value is not None and value.strip() == "0":
        return max(1, rows_left)  # HTML: rowspan=0 runs to the end of the section
    try:
        return max(1, int(value)) if value else 1
    except ValueError:
        return 1


def _html_table(table: Node) -> Table | None:
    rows = table.find_all("tr")
    specs: list[list[CellSpec]] = []
    for r, row in enumerate(rows):
        in_head = row.has_ancestor("thead")
        specs.append(
            [
                CellSpec(
                    text=cell.text().strip(),
                    rowspan=_span(cell.attrs.get("rowspan"), len(rows) - r),
                    colspan=_span(cell.attrs.get("colspan"), 1),
                    heading=cell.tag == "th" or in_head,
                )
                for cell in row.children_named(("th", "td"))
            ]
        )
    return build_table(specs) if specs else None


def parse_html_tables(text: str) -> list[Table]:
    """HTML ``<table>`` elements anywhere in the text (nested ones too)."""
    return [t for node in parse_html(text).find_all("table") if (t := _html_table(node))]


def parse_tables(text: str, *, markdown: bool = True) -> list[Table]:
    """All tables of a page: pipe tables (unless ``markdown`` is False), then HTML tables."""
    return (parse_markdown_tables(text) if markdown else []) + parse_html_tables(text)
