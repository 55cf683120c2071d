"""HTML in replies: tables and HTML → Markdown."""

from __future__ import annotations

import pytest

from ocrflow.recipes.markup import (
    TABLES_MARKDOWN,
    check_table_format,
    clean_empty_cells,
    convert_tables,
    html_to_markdown,
    split_blocks,
    table_to_markdown,
)

SIMPLE = (
    "<table><tr><th>Site</th><th>NTU</th></tr><tr><td>North | East</td><td>3.2</td></tr></table>"
)
SPANNED = '<table><tr><td colspan="2">Both</td></tr><tr><td>a</td><td>b</td></tr></table>'


def test_simple_table_to_markdown() -> None:
    assert table_to_markdown(SIMPLE) == ("| Site | NTU |\n| --- | --- |\n| North \\| East | 3.2 |")


def test_table_with_spans_stays_html() -> None:
    assert table_to_markdown(SPANNED) == SPANNED


def test_convert_tables_keeps_html_by_default() -> None:
    text = f"Before\n\n{SIMPLE}\n\nAfter"
    assert convert_tables(text) == text
    assert "| Site | NTU |" in convert_tables(text, TABLES_MARKDOWN)


def test_unknown_table_format_is_refused() -> None:
    with pytest.raises(ValueError, match="table_format"):
        check_table_format("latex")


def test_clean_empty_cells_drops_empty_rows_and_trailing_columns() -> None:
    table = (
        "<table><tr><td>Name</td><td>Unit</td><td></td><td> </td></tr>"
        "<tr><td></td><td>&nbsp;</td><td></td><td></td></tr>"
        "<tr><td>Lead</td><td></td><td></td><td></td></tr></table>"
    )
    assert clean_empty_cells(table) == (
        "<table><tr><td>Name</td><td>Unit</td></tr><tr><td>Lead</td><td></td></tr></table>"
    )


def test_clean_empty_cells_keeps_columns_of_spanned_tables() -> None:
    table = '<table><tr><td colspan="2">Both</td><td></td></tr><tr><td></td><td></td></tr></table>'
    assert clean_empty_cells(table) == '<table><tr><td colspan="2">Both</td><td></td></tr></table>'


def test_html_to_markdown_blocks_and_inline() -> None:
    html = (
        "<h2>Methods</h2><p>We used <b>two</b> <i>gauges</i> and "
        '<a href="https://example.org">a log</a>.<br>Then <math>x^{2} &lt; y</math> held.</p>'
        "<ol><li>first</li><li>second<ul><li>inner</li></ul></li></ol>"
        '<math display="block">\\frac{a}{b}</math><hr>'
        "<pre><code>if x &lt; 1:\n    pass</code></pre>"
    )
    assert html_to_markdown(html).markdown == (
        "## Methods\n\n"
        "We used **two** *gauges* and [a log](https://example.org).\n"
        "Then $x^{2} < y$ held.\n\n"
        "1. first\n2. second\n    - inner\n\n"
        "$$\n\\frac{a}{b}\n$$\n\n---\n\n"
        "```\nif x < 1:\n    pass\n```"
    )


def test_html_to_markdown_tables_images_and_checkboxes() -> None:
    html = (
        '<p><input type="checkbox" checked> Yes <input type="checkbox"> No</p>'
        f'<img alt="A map of the basin"/>{SIMPLE}<p>H<sub>2</sub>O</p>'
    )
    converted = html_to_markdown(html)
    assert converted.markdown == f"☑ Yes ☐ No\n\n{SIMPLE}\n\nH<sub>2</sub>O"
    assert converted.image_alts == ("A map of the basin",)
    assert "| Site | NTU |" in html_to_markdown(html, TABLES_MARKDOWN).markdown


def test_split_blocks_copies_inner_html_exactly() -> None:
    html = (
        '<div data-label="Text" data-bbox="1 2 3 4"><p>a <div>nested</div> b</p></div>\n'
        "loose words\n"
        '<div data-label="Image"><img alt="x > y"></div>'
        '<div data-label="Text"><p>cut off'
    )
    blocks = split_blocks(html)
    assert [b.attrs.get("data-label") for b in blocks] == ["Text", None, "Image", "Text"]
    assert blocks[0].inner_html == "<p>a <div>nested</div> b</p>"
    assert blocks[0].attrs["data-bbox"] == "1 2 3 4"
    assert blocks[1].inner_html.strip() == "loose words"
    assert blocks[2].inner_html == '<img alt="x > y">'
    assert blocks[3].inner_html == "<p>cut off"
