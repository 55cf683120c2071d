"""The ``chunks`` output on real documents: a corpus report with its reference layout
(docling's ground truth: labels, boxes, tables, page footers) and the real CLI on the
examples."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from ocrflow.document import blocks_from_rows
from ocrflow.sinks import DocumentMeta, FinishedDocument
from ocrflow.sinks.chunking import WHOLE_LABELS
from ocrflow.sinks.chunks import ChunksSink, chunks_key
from ocrflow.sinks.tokens import count_tokens
from ocrflow.storage.local import LocalStore
from ocrflow.types import Block, BlockLabel, DocStatus, DocumentResult, PageResult, Route, unit_box
from tests.integration.cli_helpers import ocrflow, results

REPO = Path(__file__).resolve().parents[3]
REPORT = "groundtruth/docling__redp5110_sampled.json"  # an 18-page IBM Redbook sample
_DOCLING_LABELS = {
    "text": BlockLabel.TEXT,
    "title": BlockLabel.TITLE,
    "section_header": BlockLabel.SECTION_HEADER,
    "list_item": BlockLabel.LIST_ITEM,
    "caption": BlockLabel.CAPTION,
    "footnote": BlockLabel.FOOTNOTE,
    "code": BlockLabel.CODE,
    "formula": BlockLabel.FORMULA,
    "page_header": BlockLabel.PAGE_HEADER,
    "page_footer": BlockLabel.PAGE_FOOTER,
    "table": BlockLabel.TABLE,
    "document_index": BlockLabel.TABLE,
}
_WORD = re.compile(r"\w+")


def _docling_pages(path: Path) -> dict[int, list[Block]]:
    """Each page's blocks in docling's reading order (its furniture last), boxes in 0..1
    of the page; tables as Markdown."""
    data = json.loads(path.read_text())
    sizes = {int(n): (p["size"]["width"], p["size"]["height"]) for n, p in data["pages"].items()}
    items: list[dict[str, Any]] = []

    def walk(node: dict[str, Any]) -> None:
        for child in node.get("children", []):
            _, kind, index = child["$ref"].split("/")
            item = data[kind][int(index)]
            if kind != "groups":
                items.append(item)
            walk(item)

    walk(data["body"])
    items += [t for t in data["texts"] if t.get("content_layer") == "furniture"]
    pages: dict[int, list[Block]] = {n: [] for n in sorted(sizes)}
    for item in items:
        if not item.get("prov") or item["label"] not in _DOCLING_LABELS:
            continue
        label = _DOCLING_LABELS[item["label"]]
        prov = item["prov"][0]
        width, height = sizes[prov["page_no"]]
        b = prov["bbox"]  # points, origin at the bottom left
        box = unit_box((b["l"], height - b["t"], b["r"], height - b["b"]), width, height)
        text = _table_markdown(item["data"]) if label is BlockLabel.TABLE else item["text"]
        pages[prov["page_no"]].append(Block(label, text, box))
    return pages


def _table_markdown(data: dict[str, Any]) -> str:
    grid = [[""] * data["num_cols"] for _ in range(data["num_rows"])]
    for cell in data["table_cells"]:
        grid[cell["start_row_offset_idx"]][cell["start_col_offset_idx"]] = cell["text"]
    rows = ["| " + " | ".join(row) + " |" for row in grid]
    return "\n".join([rows[0], "|" + " --- |" * data["num_cols"], *rows[1:]])


def _words(texts: Iterable[str]) -> Counter[str]:
    return Counter(w for text in texts for w in _WORD.findall(text))


def _check_boxes(chunk: dict[str, Any], blocks: dict[int, list[Block]]) -> None:
    """Every box lies in the page and is the box of a block of that page whose text (or
    a part of it) is in the chunk."""
    assert chunk["boxes"], chunk
    parts = chunk["text"].split("\n\n")
    for entry in chunk["boxes"]:
        x0, y0, x1, y1 = entry["bbox"]
        assert 0 <= x0 <= x1 <= 1 and 0 <= y0 <= y1 <= 1
        assert entry["page"] in chunk["pages"]
        owners = [b for b in blocks[entry["page"]] if list(b.bbox or ()) == entry["bbox"]]
        assert any(
            b.text.strip() in chunk["text"] or any(p in b.text for p in parts) for b in owners
        ), entry


def _check_parts(chunk: dict[str, Any], blocks: dict[int, list[Block]]) -> None:
    """Each blank-line-separated part of the text is the text (or a part) of a block on
    the chunk's pages."""
    texts = [b.text for n in chunk["pages"] for b in blocks[n]]
    for part in chunk["text"].split("\n\n"):
        assert any(part in t for t in texts), part


def _check_size(chunk: dict[str, Any], limit: int) -> None:
    assert chunk["n_tokens"] == count_tokens(chunk["text"])
    if chunk["n_tokens"] > limit:  # only a table, formula or code block, alone
        assert len(chunk["labels"]) == 1 and chunk["labels"][0] in WHOLE_LABELS, chunk


@pytest.fixture(scope="module")
def report(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, list]:
    pages = _docling_pages(corpus / REPORT)
    results_ = tuple(
        PageResult(n, "\n\n".join(b.text for b in bl), Route.ENGINE, blocks=tuple(bl))
        for n, bl in pages.items()
    )
    result = DocumentResult("redp", "/in/redp5110.pdf", DocStatus.OK, results_, len(results_))
    document = FinishedDocument(result, DocumentMeta("redp5110.pdf", "0" * 64, None, "x", "f"))
    out = tmp_path_factory.mktemp("report")
    ChunksSink(LocalStore(out), max_tokens=128).write(document)
    lines = (out / chunks_key("redp5110.pdf")).read_text().splitlines()
    return pages, [json.loads(line) for line in lines]


def test_corpus_report_chunks_hold_its_blocks(report: tuple[dict, list]) -> None:
    pages, chunks = report
    assert len(chunks) > 40
    for chunk in chunks:
        _check_size(chunk, 128)
        _check_parts(chunk, pages)
        _check_boxes(chunk, pages)
        assert "page_footer" not in chunk["labels"]
    footers = {(n, b.bbox) for n, bl in pages.items() for b in bl if b.label == "page_footer"}
    assert len(footers) >= 18
    assert not footers & {(e["page"], tuple(e["bbox"])) for c in chunks for e in c["boxes"]}
    body = [
        b.text
        for bl in pages.values()
        for b in bl
        if b.label not in {"page_footer", "section_header"}
    ]
    assert _words(c["text"] for c in chunks) == _words(body)


def test_corpus_report_tables_whole_and_sections_headed(report: tuple[dict, list]) -> None:
    pages, chunks = report
    tables = [b.text for bl in pages.values() for b in bl if b.label == "table"]
    assert len(tables) == 6 and any(count_tokens(t) > 128 for t in tables)
    for table in tables:
        holding = [c for c in chunks if table in c["text"]]
        assert len(holding) == 1
        if count_tokens(table) > 128:
            assert holding[0]["text"] == table
    # Each chunk is headed by the last section header before its first block.
    section, heading_of = None, {}
    for n, blocks in pages.items():
        for b in blocks:
            if b.label == "section_header":
                section = " ".join(b.text.split())  # on one line, as headings are
            heading_of.setdefault((n, b.bbox), section)
    for chunk in chunks:
        first = chunk["boxes"][0]
        expected = heading_of[(first["page"], tuple(first["bbox"]))]
        assert chunk["headings"] == ([expected] if expected else [])
    assert {"Contents", "2.2 Separation of duties"} <= {h for c in chunks for h in c["headings"]}


# -- the real CLI on the examples ---------------------------------------------------------


def _run(out: Path, *args: str) -> list[dict[str, Any]]:
    done = ocrflow("run", *args, "-o", str(out), "--format", "chunks,markdown,jsonl")
    assert done.returncode == 0, done.stderr
    return results(out)


def _record_pages(record: dict[str, Any]) -> dict[int, list[Block]]:
    """A JSONL record's blocks by page (figure links as in the chunks: relative to OUT)."""
    attributes = record["attributes"]
    numbers = [span[2] for span in attributes["pdf_page_numbers"]]
    rows = [span[2] for span in attributes.get("page_blocks", [])] or [[]] * len(numbers)
    return {n: list(blocks_from_rows(r)) for n, r in zip(numbers, rows, strict=True)}


def _read_chunks(out: Path, rel: str) -> list[dict[str, Any]]:
    lines = (out / chunks_key(rel)).read_text().splitlines()
    return [json.loads(line) for line in lines]


@pytest.mark.slow
def test_cli_chunks_of_the_examples(examples_out: Path) -> None:
    out = examples_out  # conftest.py: the examples in chunks, markdown and jsonl (and more)
    records = results(out)
    assert len(records) == 6
    for record in records:
        rel = record["metadata"]["source_path"]
        pages = _record_pages(record)
        chunks = _read_chunks(out, rel)
        assert [c["chunk_index"] for c in chunks] == list(range(len(chunks)))
        for chunk in chunks:
            assert chunk["doc_id"] == record["id"]
            _check_size(chunk, 512)
            _check_parts(chunk, pages)
            if any(b.bbox for n in chunk["pages"] for b in pages[n]):
                _check_boxes(chunk, pages)
        markdown = (out / "markdown" / f"{rel}.md").read_text()
        body = [line for line in markdown.splitlines() if not line.lstrip().startswith("#")]
        # A heading goes with each chunk under it, as a heading, not in its text.
        headings = [heading for c in chunks for heading in c["headings"]]
        expected, found = _words(body), _words([*(c["text"] for c in chunks), *headings])
        assert expected, rel
        assert sum((expected & found).values()) >= 0.98 * sum(expected.values()), rel


@pytest.mark.slow
def test_cli_chunk_tokens_gives_smaller_chunks(tmp_path: Path) -> None:
    files = [str(REPO / "examples" / name) for name in ("born-digital.pdf", "invoice-photo.jpg")]
    _run(tmp_path / "default", *files)
    _run(tmp_path / "small", *files, "--chunk-tokens", "32")
    for rel in ("born-digital.pdf", "invoice-photo.jpg"):
        default = _read_chunks(tmp_path / "default", rel)
        small = _read_chunks(tmp_path / "small", rel)
        assert len(small) > len(default)
        for chunk in small:
            _check_size(chunk, 32)
        assert _words(c["text"] for c in small) == _words(c["text"] for c in default)
