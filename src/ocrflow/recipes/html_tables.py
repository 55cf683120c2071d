"""The one set of HTML-table patterns: what a table, a row, a cell and a span are.

Model replies write tables as HTML; the recipes (``recipes.markup``: to Markdown, empty
cells dropped) and the Markdown pass (``readers.markdown_clean``: placeholder rows and
columns dropped) read them with these, so that both agree on what, say, a span is.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable

#: A whole table, lazily: a nested table ends the match early (callers check for that).
TABLE = re.compile(r"<table\b.*?</table\s*>", re.S | re.I)
ROW = re.compile(r"<tr\b[^>]*>(.*?)</tr\s*>", re.S | re.I)
#: A cell: its tag (td or th), its attributes as written, its inner HTML.
CELL = re.compile(r"<(t[dh])\b([^>]*)>(.*?)</\1\s*>", re.S | re.I)
TAGS = re.compile(r"<[^>]*>")
#: A cell spanning more than one row or column: ``colspan="1"`` spans nothing (a table
#: with it still lines up, so its columns may still be trimmed or made a pipe table).
_SPAN = re.compile(r"\b(?:row|col)span\s*=\s*[\"']?(?!1\b)\d", re.I)

Cell = tuple[str, str, str]


def has_spans(table_html: str) -> bool:
    """Whether a cell of the table spans more than one row or column."""
    return _SPAN.search(table_html) is not None


def table_rows(table_html: str) -> list[list[Cell]]:
    """The table's rows, each a list of ``(tag, attributes, inner HTML)`` cells."""
    return [CELL.findall(row) for row in ROW.findall(table_html)]


def cell_text(cell_html: str) -> str:
    """What a cell shows: tags dropped, entities decoded, no-break spaces as spaces, trimmed."""
    return html.unescape(TAGS.sub("", cell_html)).replace("\xa0", " ").strip()


def rebuild_table(rows: Iterable[Iterable[Cell]]) -> str:
    """A table written again from its cells (attributes kept, inner HTML trimmed)."""
    body = "".join(
        "<tr>"
        + "".join(f"<{tag}{attrs}>{inner.strip()}</{tag}>" for tag, attrs, inner in cells)
        + "</tr>"
        for cells in rows
    )
    return f"<table>{body}</table>"
