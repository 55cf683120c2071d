"""The document model: compact rows, named dictionaries, Markdown structure, records that
carry blocks (checkpoints, done markers, JSONL) and records written before blocks existed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ocrflow.document import (
    Block,
    BlockLabel,
    Document,
    Line,
    Word,
    block_from_row,
    block_to_row,
    blocks_from_markdown,
    blocks_from_rows,
    blocks_to_rows,
    document_from_result,
)
from ocrflow.sinks.base import DocumentMeta, figure_markdown
from ocrflow.sinks.jsonl import dolma_record
from ocrflow.storage.local import LocalStore
from ocrflow.types import (
    DocStatus,
    DocumentResult,
    Figure,
    ImageSize,
    PageResult,
    Route,
    unit_box,
    unturn_blocks,
    unturn_box,
)
from ocrflow.workspace.records import DoneRecord
from ocrflow.workspace.state import Workspace, page_from_dict, page_to_dict

LINES = (
    Line("first line", (0.1, 0.1, 0.5, 0.12), 0.98, (Word("first", (0.1, 0.1, 0.2, 0.12), 0.99),)),
    Line("second line", (0.1, 0.13, 0.48, 0.15), 0.91),
)
BLOCKS = (
    Block(BlockLabel.TEXT, "first line\nsecond line", (0.1, 0.1, 0.5, 0.15), 0.95, LINES),
    Block(BlockLabel.TABLE, "| a | b |\n| --- | --- |\n| 1 | 2 |", (0.1, 0.2, 0.9, 0.4), None),
    Block(BlockLabel.FIGURE, "<!--figure:0-->", (0.2, 0.5, 0.6, 0.8), source_label="image"),
    Block(BlockLabel.SECTION_HEADER, "## Results"),
)


def _page(number: int = 1, text: str = "first line\nsecond line", **kw: object) -> PageResult:
    return PageResult(number, text, Route.ENGINE, **kw)  # type: ignore[arg-type]


# -- rows -----------------------------------------------------------------------------------


def test_rows_round_trip_through_json() -> None:
    rows = json.loads(json.dumps(blocks_to_rows(BLOCKS)))
    assert blocks_from_rows(rows) == BLOCKS


def test_rows_leave_out_what_the_lines_or_defaults_say() -> None:
    paragraph, table, figure, heading = (block_to_row(b) for b in BLOCKS)
    assert paragraph[1] is None, "a paragraph's text is its lines: not stored twice"
    assert table == ["table", "| a | b |\n| --- | --- |\n| 1 | 2 |", [0.1, 0.2, 0.9, 0.4]]
    assert figure[-1] == "image"
    assert heading == ["section_header", "## Results"]


def test_rows_round_boxes_to_four_places() -> None:
    block = Block(BlockLabel.TEXT, "x", (0.123456, 0.5, 0.987654321, 0.6), 0.912345)
    assert block_to_row(block) == ["text", "x", [0.1235, 0.5, 0.9877, 0.6], 0.9123]


def test_an_unknown_label_from_a_newer_writer_reads_as_text() -> None:
    block = block_from_row(["marginalia", "note", None, None, [], None])
    assert block == Block(BlockLabel.TEXT, "note", source_label="marginalia")


def test_a_short_row_reads_with_defaults() -> None:
    assert block_from_row(["caption", "Fig. 1"]) == Block(BlockLabel.CAPTION, "Fig. 1")


# -- boxes ----------------------------------------------------------------------------------


@pytest.mark.parametrize("degrees", [90, 180, 270])
def test_unturn_box_inverts_a_quarter_turn(degrees: int) -> None:
    # A point (u, v) of a page turned clockwise by 90 lands at (1 - v, u).
    box = (0.1, 0.2, 0.3, 0.5)
    turned = box
    for _ in range(degrees // 90):
        x0, y0, x1, y1 = turned
        turned = (1 - y1, x0, 1 - y0, x1)
    assert unturn_box(unit_box(turned, 1, 1), degrees) == pytest.approx(box)


def test_unturn_blocks_moves_lines_and_words_too() -> None:
    (block,) = unturn_blocks(BLOCKS[:1], 180)
    assert block.bbox == pytest.approx((0.5, 0.85, 0.9, 0.9))
    assert block.lines[0].words[0].bbox == pytest.approx((0.8, 0.88, 0.9, 0.9))


# -- Markdown structure ---------------------------------------------------------------------

MARKDOWN = """# Annual Report

## Income

Revenue grew in every region,
mostly in the north.

- first item
  continued
- second item

| year | total |
|---|---|
| 2024 | 12 |

$$
E = mc^2
$$

```python
print("hi")
```

<table><tr><td>a</td></tr>
</table>

<!--figure:0-->

[^1]: A footnote.
| not a table without a rule |"""


def test_markdown_blocks_follow_the_structure_in_order() -> None:
    blocks = blocks_from_markdown(MARKDOWN)
    assert [b.label for b in blocks] == [
        BlockLabel.TITLE,
        BlockLabel.SECTION_HEADER,
        BlockLabel.TEXT,
        BlockLabel.LIST_ITEM,
        BlockLabel.LIST_ITEM,
        BlockLabel.TABLE,
        BlockLabel.FORMULA,
        BlockLabel.CODE,
        BlockLabel.TABLE,
        BlockLabel.FIGURE,
        BlockLabel.FOOTNOTE,
        BlockLabel.TEXT,
    ]
    assert blocks[2].text == "Revenue grew in every region,\nmostly in the north."
    assert blocks[3].text == "- first item\n  continued"
    assert blocks[7].text.startswith("```python") and blocks[7].text.endswith("```")
    assert all(b.bbox is None and b.confidence is None for b in blocks)
    assert "".join(MARKDOWN.split()) == "".join("".join(b.text for b in blocks).split())


def test_markdown_blocks_of_a_cut_off_fence_run_to_the_end() -> None:
    (text, code) = blocks_from_markdown("Intro\n\n```\nnever closed\nstill code")
    assert text.label is BlockLabel.TEXT and code.label is BlockLabel.CODE
    assert code.text.endswith("still code")
    assert blocks_from_markdown("") == ()


# -- the Document ---------------------------------------------------------------------------


def _result() -> DocumentResult:
    figure = Figure(1, 0, "image", (0.2, 0.5, 0.6, 0.8), b"png")
    page = _page(
        text="first line\nsecond line\n\n<!--figure:0-->",
        blocks=BLOCKS[:1] + BLOCKS[2:3],
        figures=(figure,),
        image_size=ImageSize(1000, 1400),
        attributes={"rotation": 90, "mean_confidence": 0.951234},
    )
    blank = PageResult(2, "", Route.BLANK)
    return DocumentResult("doc", "/in/a.pdf", DocStatus.OK, (blank, page), 2)


def test_document_from_result_links_figures_in_page_and_blocks() -> None:
    meta = DocumentMeta("a.pdf", "sha", None, "embedded", "fp")
    doc = document_from_result(_result(), meta, figure_markdown=lambda f: figure_markdown("doc", f))
    first, second = doc.pages
    assert (first.number, second.number) == (1, 2), "pages in page order"
    link = "![image](figures/doc/p1-0.png)"
    assert first.markdown == f"first line\nsecond line\n\n{link}"
    assert first.blocks[1].text == link and first.blocks[1].bbox == (0.2, 0.5, 0.6, 0.8)
    assert (first.rotation, first.confidence, first.size) == (90, 0.9512, ImageSize(1000, 1400))
    assert doc.markdown == first.markdown, "a blank page adds nothing"
    assert doc.metadata["rel"] == "a.pdf" and doc.metadata["engine"] == "embedded"


def test_document_to_dict_and_back() -> None:
    doc = document_from_result(_result(), {"rel": "a.pdf"})
    data = json.loads(json.dumps(doc.to_dict()))
    assert data["pages"][0]["blocks"][0]["lines"][0]["words"][0]["text"] == "first"
    assert data["markdown"] == doc.markdown
    assert Document.from_dict(data) == doc


def test_page_confidence_falls_back_to_the_blocks() -> None:
    page = _page(blocks=(Block(BlockLabel.TEXT, "ab", confidence=0.5), BLOCKS[0]))
    (only,) = document_from_result(DocumentResult("d", "s", DocStatus.OK, (page,))).pages
    expected = (0.5 * 2 + 0.95 * len(BLOCKS[0].text)) / (2 + len(BLOCKS[0].text))
    assert only.confidence == pytest.approx(expected, abs=1e-4)


# -- records that carry blocks --------------------------------------------------------------


def test_a_checkpointed_page_reads_back_equal(tmp_path: Path) -> None:
    page = _page(blocks=BLOCKS, image_size=ImageSize(10, 20))
    workspace = Workspace(LocalStore(tmp_path))
    workspace.save_pages("doc", [page, _page(2)])
    assert workspace.load_pages("doc") == {1: page, 2: _page(2)}


def test_a_checkpoint_written_before_blocks_loads_without() -> None:
    old = {
        "page": 3,
        "text": "t",
        "route": "text_layer",
        "status": "ok",
        "attempts": 0,
        "error": None,
        "reason": None,
        "tokens_in": 0,
        "tokens_out": 0,
        "latency_s": 0.0,
        "attributes": {},
    }
    page = page_from_dict(old)
    assert page.blocks == () and page.text == "t"
    assert "blocks" not in page_to_dict(page), "pages without blocks keep the old shape"


def test_done_markers_carry_blocks_and_old_ones_load(tmp_path: Path) -> None:
    workspace = Workspace(LocalStore(tmp_path))
    result = DocumentResult("d", "s", DocStatus.OK, (_page(blocks=BLOCKS),), 1)
    workspace.mark_done(result)
    record = workspace.done_record("d")
    assert record is not None and blocks_from_rows(record.pages[0].blocks) == BLOCKS
    old = '{"doc_id":"d","source":"s","pages":[{"page":1,"route":"engine"}]}'
    assert DoneRecord.load(old).pages[0].blocks == []


def test_the_jsonl_record_carries_blocks_beside_the_dolma_fields() -> None:
    meta = DocumentMeta("a.pdf", "sha", None, "embedded", "fp")
    record = dolma_record(_result(), meta)
    spans = record["attributes"]["pdf_page_numbers"]
    page_blocks = record["attributes"]["page_blocks"]
    assert [s[:2] for s in page_blocks] == [s[:2] for s in spans]
    assert page_blocks[1][2] == [], "a page without blocks has an empty list"
    figure_row = page_blocks[0][2][1]
    assert figure_row[1] == "![image](figures/doc/p1-0.png)", "links as in the text"
    assert blocks_from_rows(page_blocks[0][2])[0] == BLOCKS[0]
    plain = DocumentResult("d", "s", DocStatus.OK, (_page(),), 1)
    assert "page_blocks" not in dolma_record(plain, meta)["attributes"]
