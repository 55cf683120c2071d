"""The canonical Markdown pass, rule by rule, on real model outputs and reference text.

Fragments come from real documents and OCR outputs: the Linn 9000 manual's OCR text in
the corpus (``ocrmypdf__linn.txt``), citation markers as olmOCR-style converters write them
in published Markdown (a materials-selection review, a trading book, a Chinese policy
brief), exponent tables from a cryptography write-up, and DeepSeek-OCR/olmOCR reply shapes.
"""

from __future__ import annotations

import pytest

from ocrflow.readers.markdown_clean import (
    clean_markdown,
    clean_page,
    collapse_blank_lines,
    drop_placeholder_tables,
    join_hyphenated,
    recipe_prompts,
    strip_prompt_echo,
    sup_to_footnotes,
)
from ocrflow.recipes.deepseek import DeepseekRecipe
from ocrflow.recipes.olmocr import OlmocrRecipe
from ocrflow.types import PageResult, Route
from tests.needs import CORPUS, need_corpus_file

LINN = CORPUS / "groundtruth" / "ocrmypdf__linn.txt"


# -- blank lines -------------------------------------------------------------------------------
def test_runs_of_blank_lines_become_one() -> None:
    raw = (
        "# Editing\n\n\n\nTo erase a wrong note,\nsimply hold ERASE.\n \n\t\n\n"
        "Creating a Song\n\n\n"
    )
    assert collapse_blank_lines(raw) == (
        "# Editing\n\nTo erase a wrong note,\nsimply hold ERASE.\n\nCreating a Song"
    )


def test_blank_lines_inside_code_fences_stay() -> None:
    raw = "Example:\n\n\n```python\nx = 1\n\n\n\ny = 2\n```\n\n\n\nEnd"
    assert collapse_blank_lines(raw) == "Example:\n\n```python\nx = 1\n\n\n\ny = 2\n```\n\nEnd"


# -- hyphenation --------------------------------------------------------------------------------
def test_a_word_split_across_lines_is_joined_when_the_page_has_it_whole() -> None:
    need_corpus_file(LINN)
    page = LINN.read_text(encoding="utf-8")
    assert "SINGLE STEP func-\ntion." in page and " function " in page
    cleaned = join_hyphenated(page)
    assert "SINGLE STEP function. To overdub" in cleaned
    # An em dash at a line end is not a hyphen; nothing else on the page changes.
    assert "sequence-—\nwhen played back" in cleaned
    assert cleaned.replace("function. To", "func-\ntion. To") == page


def test_a_compound_split_at_its_hyphen_stays() -> None:
    raw = (
        "The results are well-\nknown to practitioners, and the method is well documented.\n"
        "A state-of-the-art sys-\ntem beats each earlier system."
    )
    cleaned = join_hyphenated(raw)
    assert "well-\nknown" in cleaned  # "wellknown" is nowhere on the page
    assert "A state-of-the-art system beats" in cleaned


def test_capitalised_tails_and_tables_are_left_alone() -> None:
    raw = "Jean-\nPierre wrote it; Jeanpierre is a typo elsewhere."
    assert join_hyphenated(raw) == raw
    table = "<table><tr><td>infor-\nmation</td></tr></table> The information is here."
    assert join_hyphenated(table) == table


# -- citation markers ---------------------------------------------------------------------------
def test_citation_markers_become_footnote_references() -> None:
    raw = (
        "Bhuiyan & Hammad<sup>71</sup> developed a decision support system. "
        "Grachev et al.<sup>45</sup> developed a formalized method.\n"
        "Finally, setting a stop loss based solely on your capital is incorrect.<sup>71</sup> "
        "Someone with a tiny account\n"
        "印尼 BI 獨立性逐步建立中<sup>71</sup>。 Related work<sup>3-5, 9</sup> agrees."
    )
    assert sup_to_footnotes(raw) == (
        "Bhuiyan & Hammad[^71] developed a decision support system. "
        "Grachev et al.[^45] developed a formalized method.\n"
        "Finally, setting a stop loss based solely on your capital is incorrect.[^71] "
        "Someone with a tiny account\n"
        "印尼 BI 獨立性逐步建立中[^71]。 Related work[^3][^4][^5][^9] agrees."
    )


def test_exponents_and_units_keep_their_superscripts() -> None:
    raw = (
        "| **AES-256** | 2<sup>256</sup> | 74.68 | 1.370 * 10<sup>71</sup> |\n"
        "A volume of 3 cm<sup>3</sup> over an area of 2 m<sup>2</sup>; x<sup>2</sup> + 1."
    )
    assert sup_to_footnotes(raw) == raw


def test_a_line_opening_with_a_marker_is_a_footnote_definition() -> None:
    raw = "Body text.<sup>12</sup>\n\n<sup>12</sup> Smith, J. (2019). A study. Journal 4, 1-9."
    assert sup_to_footnotes(raw) == (
        "Body text.[^12]\n\n[^12]: Smith, J. (2019). A study. Journal 4, 1-9."
    )


# -- tables ---------------------------------------------------------------------------------------
def test_placeholder_rows_and_columns_go_but_placeholders_in_data_rows_stay() -> None:
    # The last column has no header and nothing in it: a column the model made up.
    raw = (
        "| Algorithm | Key space | Time (s) | |\n"
        "|:---|---:|---:|---|\n"
        "| AES-128 | 2<sup>128</sup> | 52.7 | None |\n"
        "| RSA-2048 | N/A | N/A | — |\n"
        "| None | None | None | - |\n"
    )
    header_only = "| Name | Ada Lovelace |\n|---|---|\n| - | None |\n"
    assert drop_placeholder_tables(header_only) == "| Name | Ada Lovelace |\n| --- | --- |\n"
    assert drop_placeholder_tables(raw) == (
        "| Algorithm | Key space | Time (s) |\n"
        "| :--- | ---: | ---: |\n"
        "| AES-128 | 2<sup>128</sup> | 52.7 |\n"
        "| RSA-2048 | N/A | N/A |\n"
    )


def test_a_table_of_nothing_but_placeholders_is_dropped() -> None:
    raw = "Before\n\n| | |\n|---|---|\n| None | - |\n| N/A | |\n\nAfter"
    assert collapse_blank_lines(drop_placeholder_tables(raw)) == "Before\n\nAfter"
    html = "A<table><tr><td></td><td>None</td></tr><tr><td>&nbsp;</td><td>—</td></tr></table>B"
    assert drop_placeholder_tables(html) == "AB"


def test_html_tables_lose_placeholder_rows_and_columns_only() -> None:
    raw = (
        "<table><thead><tr><th>Year</th><th>Revenue</th><th></th></tr></thead>"
        "<tr><td>2023</td><td>—</td><td>None</td></tr>"
        "<tr><td>None</td><td>N/A</td><td></td></tr>"
        "<tr><td>2024</td><td>1,204</td><td>null</td></tr></table>"
    )
    assert drop_placeholder_tables(raw) == (
        "<table><tr><th>Year</th><th>Revenue</th></tr><tr><td>2023</td><td>—</td></tr>"
        "<tr><td>2024</td><td>1,204</td></tr></table>"
    )
    whole = "<table><tr><td>a</td><td>-</td></tr><tr><td>b</td><td>c</td></tr></table>"
    assert drop_placeholder_tables(whole) == whole  # nothing to drop: kept byte for byte


def test_spanning_tables_keep_their_columns() -> None:
    raw = (
        '<table><tr><td colspan="2">Total</td><td></td></tr>'
        "<tr><td>-</td><td>-</td><td>-</td></tr><tr><td>a</td><td>b</td><td></td></tr></table>"
    )
    assert drop_placeholder_tables(raw) == (
        '<table><tr><td colspan="2">Total</td><td></td></tr>'
        "<tr><td>a</td><td>b</td><td></td></tr></table>"
    )


# -- prompt echoes --------------------------------------------------------------------------------
def test_a_deepseek_prompt_echo_is_stripped() -> None:
    prompts = recipe_prompts(DeepseekRecipe())
    assert prompts == ("<|grounding|>Convert the document to markdown.",)
    reply = "Convert the document to markdown.\n# Quarterly Report\n\nRevenue grew."
    assert strip_prompt_echo(reply, prompts) == "# Quarterly Report\n\nRevenue grew."
    free = recipe_prompts(DeepseekRecipe(mode="free"))
    assert strip_prompt_echo("free ocr.\nINVOICE 2291", free) == "INVOICE 2291"


def test_an_olmocr_prompt_echo_is_stripped_whole_or_by_its_first_line() -> None:
    prompt = OlmocrRecipe().prompt
    first_line = prompt.split("\n", 1)[0]
    assert len(first_line) >= 30
    body = "# Annual Report\n\nThe board met twice."
    assert strip_prompt_echo(prompt + "\n" + body, (prompt,)) == body
    assert strip_prompt_echo(first_line + "\n" + body, (prompt,)) == body


def test_text_that_only_starts_like_the_prompt_stays() -> None:
    prompts = ("<|grounding|>Convert the document to markdown.",)
    text = "Convert the document to markdown using pandoc, then review it."
    assert strip_prompt_echo(text, prompts) == text
    assert strip_prompt_echo("# Title\nConvert the document to markdown.", prompts).startswith(
        "# Title"
    )


# -- the whole pass ------------------------------------------------------------------------------
def test_clean_markdown_runs_every_rule_and_names_them() -> None:
    reply = (
        "Convert the document to markdown.\n# Results\n\n\n\n"
        "The inter-\nnational trials<sup>7</sup> were international in scope.\n\n"
        "| | |\n|---|---|\n| None | None |\n"
    )
    result = clean_markdown(reply, ("<|grounding|>Convert the document to markdown.",))
    assert result.text == ("# Results\n\nThe international trials[^7] were international in scope.")
    assert result.applied == ("prompt_echo", "tables", "footnotes", "hyphens", "blank_lines")
    assert clean_markdown(result.text).applied == ()  # a clean text is a fixed point


@pytest.mark.parametrize("route", [Route.TEXT_LAYER, Route.FALLBACK, Route.BLANK])
def test_only_engine_pages_are_cleaned(route: Route) -> None:
    page = PageResult(1, "a\n\n\n\nb", route)
    assert clean_page(page) is page


def test_clean_page_keeps_the_raw_text_and_records_the_rules() -> None:
    page = PageResult(2, "Title\n\n\n\nBody<!--figure:0-->", Route.ENGINE, attributes={"x": 1})
    cleaned = clean_page(page)
    assert cleaned.text == "Title\n\nBody<!--figure:0-->"
    assert cleaned.raw_text == page.text
    assert cleaned.attributes == {"x": 1, "cleaned": ["blank_lines"]}
    untouched = PageResult(3, "Already clean.", Route.ENGINE)
    assert clean_page(untouched) is untouched and untouched.raw_text is None
