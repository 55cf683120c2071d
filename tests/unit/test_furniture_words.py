"""Page furniture left out of reading text (``--drop-headers-footers``), kept in layout
formats; lines and word boxes estimated for engines that give less than words."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from ocrflow.config import OutputOptions
from ocrflow.document import block_lines, line_words, plain_lines
from ocrflow.document.furniture import page_without_furniture, without_furniture
from ocrflow.sinks import DocumentMeta, FinishedDocument, Outputs, figure_formats
from ocrflow.storage.local import LocalStore
from ocrflow.types import Block, BlockLabel, DocStatus, DocumentResult, Line, PageResult, Route

HEADER = Block(BlockLabel.PAGE_HEADER, "Annual Report 2024", (0.1, 0.02, 0.9, 0.05))
BODY = Block(BlockLabel.TEXT, "The Annual Report 2024 shows growth.", (0.1, 0.1, 0.9, 0.5))
FOOTER = Block(BlockLabel.PAGE_FOOTER, "7", (0.45, 0.95, 0.55, 0.98))
PAGE = PageResult(
    7,
    "Annual Report 2024\n\nThe Annual Report 2024 shows growth.\n\n7",
    Route.ENGINE,
    blocks=(HEADER, BODY, FOOTER),
)


def test_furniture_is_cut_from_text_and_blocks_where_it_stands() -> None:
    page = page_without_furniture(PAGE)
    # The header's words repeated in the body stay: blocks are found in order.
    assert page.text == "The Annual Report 2024 shows growth."
    assert page.blocks == (BODY,)
    assert page_without_furniture(page) is page


def test_a_page_without_furniture_is_left_alone() -> None:
    plain = PageResult(1, "Just text.", Route.ENGINE, blocks=(BODY,))
    document = DocumentResult("d", "x.pdf", DocStatus.OK, (plain,), 1)
    assert without_furniture(document) is document


def _outputs(tmp_path: Path, *, drop: bool) -> Path:
    out = tmp_path / ("dropped" if drop else "kept")
    options = OutputOptions(formats=("markdown", "jsonl", "json"), drop_headers_footers=drop)
    outputs = Outputs(options, LocalStore(str(out)), "w")
    result = DocumentResult("doc1", "/in/report.pdf", DocStatus.OK, (PAGE,), 7)
    meta = DocumentMeta("report.pdf", "f" * 64, None, "embedded", "fp")
    assert outputs.write(FinishedDocument(result, meta)) == ["doc1"]
    outputs.close()
    return out


def test_drop_headers_footers_applies_to_reading_text_only(tmp_path: Path) -> None:
    kept, dropped = _outputs(tmp_path, drop=False), _outputs(tmp_path, drop=True)
    assert (kept / "markdown/report.pdf.md").read_text().startswith("Annual Report 2024\n")
    assert (dropped / "markdown/report.pdf.md").read_text() == (
        "The Annual Report 2024 shows growth.\n"
    )
    record = json.loads((dropped / "results/doc1.jsonl").read_text())
    assert record["text"] == "The Annual Report 2024 shows growth."
    labels = [r[0] for r in record["attributes"]["page_blocks"][0][2]]
    assert labels == ["text"]
    # The layout formats keep the furniture.
    document = json.loads((dropped / "json/report.pdf.json").read_text())
    assert [b["label"] for b in document["pages"][0]["blocks"]] == [
        "page_header",
        "text",
        "page_footer",
    ]


def test_assemble_rewrites_the_formats_that_hold_figures() -> None:
    every = ("markdown", "jsonl", "parquet", "json", "pdf", "hocr", "alto", "docling", "chunks")
    assert figure_formats(every) == ("markdown", "jsonl", "json", "docling", "chunks")


def test_plain_lines_strip_markdown_syntax() -> None:
    markdown = "## Results **now**\n\n| a | b |\n|---|---|\n| 1 | [two](x.png) |\n- item"
    assert plain_lines(markdown) == ["Results now", "a b", "1 two", "item"]


def test_lines_are_spread_over_a_block_box_and_words_over_a_line_box() -> None:
    block = Block(BlockLabel.TEXT, "first line\nsecond one here", (0.2, 0.1, 0.6, 0.3))
    first, second = block_lines(block)
    assert (first.bbox, second.bbox) == ((0.2, 0.1, 0.6, 0.2), (0.2, 0.2, 0.6, 0.3))
    words = line_words(second)
    assert [w.text for w in words] == ["second", "one", "here"]
    boxes = [w.bbox for w in words]
    assert all(b is not None and 0.2 <= b[0] < b[2] <= 0.6 for b in boxes)
    assert all(a[2] < b[0] for a, b in itertools.pairwise(boxes))  # in order
    # Longer words get wider boxes; the last ends at the line's end.
    assert boxes[0][2] - boxes[0][0] > boxes[1][2] - boxes[1][0]
    assert boxes[-1][2] == 0.6


def test_engine_lines_and_words_are_kept() -> None:
    line = Line("a b", (0.0, 0.0, 1.0, 0.1), 0.9)
    block = Block(BlockLabel.TEXT, "a b", (0.0, 0.0, 1.0, 0.1), lines=(line,))
    assert block_lines(block) == (line,)
    assert [w.confidence for w in line_words(line)] == [0.9, 0.9]
    assert block_lines(Block(BlockLabel.FIGURE, "<!--figure:0-->", (0, 0, 1, 1))) == ()
