"""One set of HTML-table patterns for the recipes and the Markdown pass: a span of 1 is
no span in either (they used to disagree: ``recipes.markup`` counted ``colspan="1"``)."""

from __future__ import annotations

import pytest

from ocrflow.readers.markdown_clean import drop_placeholder_tables
from ocrflow.recipes.html_tables import cell_text, has_spans, rebuild_table, table_rows
from ocrflow.recipes.markup import clean_empty_cells, table_to_markdown

ONE_SPAN = (
    '<table><tr><th colspan="1">Year</th><th>Crop</th><th></th></tr>'
    "<tr><td rowspan=1>1882</td><td>Rye</td><td></td></tr></table>"
)
REAL_SPAN = (
    '<table><tr><th colspan="2">Harvest</th><th></th></tr>'
    "<tr><td>1882</td><td>Rye</td><td></td></tr></table>"
)


@pytest.mark.parametrize(
    ("attribute", "spans"),
    [
        ('colspan="2"', True),
        ("rowspan=3", True),
        ("COLSPAN = '10'", True),
        ('colspan="1"', False),
        ("rowspan=1", False),
        ("rowspan='1 '", False),
        ('class="colspan"', False),
        ("", False),
    ],
)
def test_a_span_is_more_than_one_row_or_column(attribute: str, spans: bool) -> None:
    assert has_spans(f"<table><tr><td {attribute}>x</td></tr></table>") is spans


def test_rows_cells_and_text() -> None:
    rows = table_rows(ONE_SPAN)
    assert [[c[0] for c in r] for r in rows] == [["th", "th", "th"], ["td", "td", "td"]]
    assert rows[0][0] == ("th", ' colspan="1"', "Year")
    assert cell_text("<b>1&nbsp;882</b>&amp;\xa0 ") == "1 882&"
    assert (
        rebuild_table([[("td", ' class="n"', " 4 ")]])
        == '<table><tr><td class="n">4</td></tr></table>'
    )


def test_the_recipes_make_a_span_of_one_a_pipe_table() -> None:
    assert table_to_markdown(ONE_SPAN).splitlines()[:3] == [
        "| Year | Crop |  |",
        "| --- | --- | --- |",
        "| 1882 | Rye |  |",
    ]
    assert table_to_markdown(REAL_SPAN) == REAL_SPAN, "a real span stays HTML"


def test_both_trim_the_empty_column_of_a_table_with_a_span_of_one() -> None:
    trimmed = clean_empty_cells(ONE_SPAN)
    assert [len(r) for r in table_rows(trimmed)] == [2, 2]
    cleaned = drop_placeholder_tables(ONE_SPAN)
    assert [len(r) for r in table_rows(cleaned)] == [2, 2]
    assert "Rye" in trimmed and "Rye" in cleaned


def test_neither_trims_columns_of_a_table_with_a_real_span() -> None:
    assert [len(r) for r in table_rows(clean_empty_cells(REAL_SPAN))] == [2, 3]
    assert drop_placeholder_tables(REAL_SPAN) == REAL_SPAN
