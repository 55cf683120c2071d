"""PaddleOCR-VL: the pipeline's element prompts, and its replies read as PaddleX reads them
(OTSL tables into HTML, ``\\(...\\)`` LaTeX into ``$``)."""

from __future__ import annotations

import pytest

from ocrflow.errors import ParseError
from ocrflow.recipes.markup import TABLES_MARKDOWN
from ocrflow.recipes.otsl import otsl_to_html
from ocrflow.recipes.paddleocr_vl import SERVER_FLAGS, PaddleocrVlRecipe, normalize_math
from ocrflow.recipes.registry import recipe_for_model
from ocrflow.types import BlockLabel

from .helpers import page_image, reply, sample

#: What PaddleX's ``convert_otsl_to_html`` gives on table_otsl.txt: "Model" spans two
#: rows (``<ucel>`` below it), "BLEU" two columns (``<lcel>``), the short last row is
#: padded with an empty cell.
AUTHORS_HTML = (
    '<table><tr><td rowspan="2">Model</td><td colspan="2">BLEU</td></tr>'
    "<tr><td>EN-DE</td><td>EN-FR</td></tr>"
    "<tr><td>Base</td><td>27.3</td><td>38.1</td></tr>"
    "<tr><td>Big</td><td>28.4</td><td></td></tr></table>"
)


@pytest.mark.parametrize(
    ("model", "task", "prompt"),
    [
        ("PaddlePaddle/PaddleOCR-VL", "ocr", "OCR:"),
        ("PaddlePaddle/PaddleOCR-VL-1.5", "table", "Table Recognition:"),
        ("PaddlePaddle/PaddleOCR-VL", "formula", "Formula Recognition:"),
        ("PaddlePaddle/PaddleOCR-VL", "chart", "Chart Recognition:"),
    ],
)
def test_element_prompts_follow_the_image(model: str, task: str, prompt: str) -> None:
    recipe = recipe_for_model(model, task=task)
    assert recipe.name == "paddleocr-vl"
    request = recipe.build_request(page_image(), 0)
    assert (request.prompt, request.image_first, request.temperature) == (prompt, True, 0.0)
    assert recipe.server_flags == SERVER_FLAGS and "--trust-remote-code" in SERVER_FLAGS


def test_otsl_table_becomes_the_html_paddlex_gives() -> None:
    page = PaddleocrVlRecipe(task="table").parse(reply(sample("paddleocr-vl/table_otsl.txt")))
    assert page.markdown == AUTHORS_HTML
    (block,) = page.blocks
    assert block.label is BlockLabel.TABLE and block.bbox is None


@pytest.mark.parametrize(
    ("otsl", "html"),
    [
        # Rows padded to the width that changes the fewest cells: trailing empties go.
        (
            "<fcel>a<fcel>b<nl><fcel>c<fcel>d<ecel><ecel><nl><fcel>e<fcel>f<nl>",
            "<table><tr><td>a</td><td>b</td></tr><tr><td>c</td><td>d</td></tr>"
            "<tr><td>e</td><td>f</td></tr></table>",
        ),
        # <xcel> widens and lengthens at once; cell text is HTML-escaped.
        (
            "<fcel>A&B<lcel><fcel>x<nl><ucel><xcel><fcel>y<nl>",
            '<table><tr><td rowspan="2" colspan="2">A&amp;B</td><td>x</td></tr>'
            "<tr><td>y</td></tr></table>",
        ),
        # A merge tag with nothing to merge into keeps its place empty.
        ("<lcel><fcel>z<nl>", "<table><tr><td></td><td>z</td></tr></table>"),
        ("no table here", ""),
    ],
)
def test_otsl_spans_padding_and_escaping(otsl: str, html: str) -> None:
    assert otsl_to_html(otsl) == html


def test_table_in_markdown_format() -> None:
    recipe = PaddleocrVlRecipe(task="table", table_format=TABLES_MARKDOWN)
    page = recipe.parse(reply("<fcel>item<fcel>value<nl><fcel>total<fcel>42<nl>"))
    assert page.markdown == "| item | value |\n| --- | --- |\n| total | 42 |"


def test_table_reply_without_a_table_is_malformed() -> None:
    with pytest.raises(ParseError) as caught:
        PaddleocrVlRecipe(task="table").parse(reply("Total 42"))
    assert caught.value.reason == "parse_error"


def test_ocr_reply_latex_delimiters_as_the_pipeline_rewrites_them() -> None:
    text = "The energy \\(E=mc^{2}\\) costs $5.\n\n\\[a^2+b^2=c^2\\]"
    page = PaddleocrVlRecipe().parse(reply(text))
    assert page.markdown == normalize_math(text).strip()
    assert "$ E=mc^{2} $" in page.markdown and "$$ a^2+b^2=c^2 $$" in page.markdown
    assert "$5" not in page.markdown  # the pipeline drops stray $ once delimiters are \( \)
    assert normalize_math("price $5") == "price $5"


def test_formula_task_is_one_display_formula() -> None:
    page = PaddleocrVlRecipe(task="formula").parse(reply("\\[ \\frac{a}{b} \\]"))
    assert page.markdown == "$$\n\\frac{a}{b}\n$$"
    assert [b.label for b in page.blocks] == [BlockLabel.FORMULA]


#: What PaddleX gives on the authors' published table answer (ernie_sft_table.txt): its
#: pipeline turns ``\( ... \)`` into `` $ ... $ ``, then ``convert_otsl_to_html`` (see the
#: data README for the commits; computed by running the authors' functions).
_FRACTIONS = [("[41,51)", 2), ("[51,61)", 1), ("[61,71)", 4), ("[71,81)", 6)]
_FRACTIONS += [("[81,91)", 10), ("[91,101)", 5), ("[101,111)", 2)]
PUBLISHED_TABLE_HTML = (
    "<table><tr><td>分组</td><td>频数</td><td>频率</td></tr>"
    + "".join(
        f"<tr><td>{group}</td><td>{n}</td><td>$  \\frac{{{n}}}{{30}}  $</td></tr>"
        for group, n in _FRACTIONS
    )
    + "</table>"
)


def test_published_table_answer_gives_the_html_paddlex_gives() -> None:
    text = sample("paddleocr-vl/ernie_sft_table.txt")
    assert text.startswith("<fcel>分组<fcel>频数<fcel>频率<nl>") and "\\( \\frac{2}{30} \\)" in text
    page = recipe_for_model("PaddlePaddle/PaddleOCR-VL", task="table").parse(reply(text))
    assert page.markdown == PUBLISHED_TABLE_HTML
    (block,) = page.blocks
    assert (block.label, block.text) == (BlockLabel.TABLE, PUBLISHED_TABLE_HTML)


def test_published_table_answer_as_markdown() -> None:
    recipe = PaddleocrVlRecipe(task="table", table_format=TABLES_MARKDOWN)
    lines = recipe.parse(reply(sample("paddleocr-vl/ernie_sft_table.txt"))).markdown.split("\n")
    assert lines[:2] == ["| 分组 | 频数 | 频率 |", "| --- | --- | --- |"]
    assert len(lines) == 9 and lines[-1].startswith("| [101,111) | 2 | $")


def test_published_formula_answer() -> None:
    text = sample("paddleocr-vl/ernie_sft_formula.txt")
    assert text == "\\[t_{n}\\in[0,\\infty]\\]"
    page = PaddleocrVlRecipe(task="formula").parse(reply(text))
    # PaddleX leaves " $$ t_{n}\in[0,\infty] $$ ": the same LaTeX, as a display block.
    assert page.markdown == "$$\nt_{n}\\in[0,\\infty]\n$$"
    assert [(b.label, b.text) for b in page.blocks] == [(BlockLabel.FORMULA, page.markdown)]


def test_published_chart_answer_keeps_every_data_row() -> None:
    text = sample("paddleocr-vl/ernie_sft_chart.txt")
    page = PaddleocrVlRecipe(task="chart").parse(reply(text))
    for row in ("| 22Q3 | 22Q3yoy", "电商 | 85 | 100%", "外围地区 | 45 | 20%"):
        assert row in page.markdown
    assert page.markdown.count("\n") == 4
    assert "".join(b.text for b in page.blocks).count("|") == text.count("|")
