"""Describe answers as Markdown, and figures with descriptions in the sinks' text."""

from __future__ import annotations

from pathlib import Path

import pytest

from ocrflow.config import parse_stages
from ocrflow.errors import ConfigError
from ocrflow.sinks import DocumentMeta, FigureSink, FinishedDocument
from ocrflow.sinks.base import alt_text, page_text
from ocrflow.sinks.figure_records import figure_doc_ids, finished_document, load_figure_document
from ocrflow.stages.answers import answer_markdown, prompt_for
from ocrflow.storage.local import LocalStore
from ocrflow.types import DocStatus, DocumentResult, Figure, PageResult, PageStatus, Route


def test_parse_answers_become_tables() -> None:
    fenced = "Here it is:\n| year | sales |\n|---|---|\n| 2023 | 4 |\nThat is all."
    assert answer_markdown("parse", fenced) == "| year | sales |\n|---|---|\n| 2023 | 4 |"
    records = '[{"year": 2023, "sales": 4}, {"year": 2024, "sales": 5}]'
    assert answer_markdown("parse", records) == (
        "| year | sales |\n|---|---|\n| 2023 | 4 |\n| 2024 | 5 |"
    )
    columns = '```json\n{"year": [2023, 2024], "sales": [4]}\n```'
    assert answer_markdown("parse", columns) == (
        "| year | sales |\n|---|---|\n| 2023 | 4 |\n| 2024 |  |"
    )
    assert answer_markdown("parse", '{"a|b": "x"}') == "| key | value |\n|---|---|\n| a\\|b | x |"
    # Not tabular: one paragraph, as for a caption.
    assert answer_markdown("parse", "A photo\n of a cat.") == "A photo of a cat."


def test_classify_answers_are_one_word_and_captions_one_paragraph() -> None:
    assert answer_markdown("classify", "Chart.\nIt shows sales.") == "chart"
    assert answer_markdown("caption", "  A bar chart\n\nof sales.  ") == "A bar chart of sales."


def test_prompts_and_stages_are_checked() -> None:
    assert "table" in prompt_for("parse")
    assert prompt_for("caption", "mine") == "mine"
    with pytest.raises(ValueError, match="unknown task"):
        prompt_for("summarise")
    assert parse_stages("assemble, extract,describe") == ("extract", "describe", "assemble")
    for bad in ("extract,ocr", "describe,assemble"):
        with pytest.raises(ConfigError):
            parse_stages(bad)


def test_a_described_figure_gets_alt_text_and_a_paragraph_after_its_link() -> None:
    described = Figure(1, 0, "image", (0, 0, 1, 1), description="A [big] chart\nof sales.")
    table = Figure(1, 1, "image", (0, 0, 1, 1), description="| a | b |\n|---|---|\n| 1 | 2 |")
    plain = Figure(1, 2, "image", (0, 0, 1, 1))
    text = "Intro\n\n<!--figure:0-->\n\n<!--figure:1-->\n\n<!--figure:2-->\n\nEnd"
    page = PageResult(1, text, Route.ENGINE, PageStatus.OK, figures=(described, table, plain))
    assert page_text("d", page, "../") == (
        "Intro\n\n![A (big) chart of sales.](../figures/d/p1-0.png)\n\nA [big] chart\nof sales."
        "\n\n![a; b; 1; 2](../figures/d/p1-1.png)\n\n| a | b |\n|---|---|\n| 1 | 2 |"
        "\n\n![image](../figures/d/p1-2.png)\n\nEnd"
    )
    assert alt_text("x" * 500).endswith("…") and len(alt_text("x" * 500)) == 300


def test_a_figure_document_keeps_each_figure_once_and_rebuilds_the_pages(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    figures = (
        Figure(2, 0, "chart", (0.1, 0.2, 0.3, 0.4), b"png0"),
        Figure(2, 1, "picture", (0.5, 0.5, 0.9, 0.9), b"png1"),
    )
    pages = (
        PageResult(1, "no figures", Route.TEXT_LAYER, PageStatus.OK),
        PageResult(2, "a <!--figure:0--> b <!--figure:1-->", Route.ENGINE, PageStatus.OK,
                   attributes={"rotation": 90}, figures=figures),
    )  # fmt: skip
    result = DocumentResult("doc", "/in/a.pdf", DocStatus.PARTIAL, pages, 3, reason="x")
    meta = DocumentMeta("a.pdf", "sha", 12.0, "openai:m", "fp")
    FigureSink(store).write(FinishedDocument(result, meta))
    assert figure_doc_ids(store) == ["doc"]
    record = load_figure_document(store, "doc")
    assert record is not None
    assert [(f.page, f.index, f.label, f.box, f.path) for f in record.figures] == [
        (2, 0, "chart", (0.1, 0.2, 0.3, 0.4), "figures/doc/p2-0.png"),
        (2, 1, "picture", (0.5, 0.5, 0.9, 0.9), "figures/doc/p2-1.png"),
    ]
    assert (tmp_path / "figures/doc/p2-1.png").read_bytes() == b"png1"
    rebuilt = finished_document(record, {(2, 1): "A photo."})
    assert rebuilt.meta == meta
    assert rebuilt.result.status is DocStatus.PARTIAL and rebuilt.result.page_count == 3
    page = rebuilt.result.pages[1]
    assert page.text == pages[1].text and page.attributes == {"rotation": 90}
    assert [f.description for f in page.figures] == [None, "A photo."]
    # A document without figures leaves no record.
    plain = DocumentResult("plain", "/in/b.pdf", DocStatus.OK, pages[:1], 1)
    FigureSink(store).write(FinishedDocument(plain, meta))
    assert figure_doc_ids(store) == ["doc"]
