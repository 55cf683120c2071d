"""The ``chunks`` output (RAG): synthetic documents, a real corpus document, the real CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ocrflow.sinks import DocumentMeta, FinishedDocument
from ocrflow.sinks.chunking import chunk_blocks
from ocrflow.sinks.chunks import ChunksSink, chunks_key
from ocrflow.sinks.tokens import count_tokens
from ocrflow.storage.local import LocalStore
from ocrflow.types import (
    BBox,
    Block,
    BlockLabel,
    DocStatus,
    DocumentResult,
    Figure,
    PageResult,
    Route,
)

L = BlockLabel
KEYS = {"doc_id", "source_path", "chunk_index", "text", "headings", "pages", "boxes"}
KEYS |= {"labels", "n_tokens"}

SENTENCES = [
    f"Sentence number {i} tells how box {i} of the archive was scanned and checked."
    for i in range(60)
]


def _finished(
    pages: list[list[Block]], rel: str = "reports/q1.pdf", **page: Any
) -> FinishedDocument:
    results = tuple(
        PageResult(
            n,
            "\n\n".join(b.text for b in blocks),
            Route.ENGINE,
            blocks=tuple(blocks),
            **page,
        )
        for n, blocks in enumerate(pages, 1)
    )
    result = DocumentResult("doc1", f"/in/{rel}", DocStatus.OK, results, page_count=len(pages))
    return FinishedDocument(result, DocumentMeta(rel, "0" * 64, None, "embedded", "fp"))


def _write(tmp_path: Path, document: FinishedDocument, max_tokens: int) -> list[dict[str, Any]]:
    """Write the document's chunks through the sink and read the file back."""
    ChunksSink(LocalStore(tmp_path), max_tokens=max_tokens).write(document)
    lines = (tmp_path / chunks_key(document.meta.rel)).read_text().splitlines()
    return [json.loads(line) for line in lines]


def _box(i: int) -> BBox:
    return (0.1, round(0.02 * i, 4), 0.9, round(0.02 * i + 0.015, 4))


def _table(rows: int) -> str:
    body = [f"| item {r} | {r * 7} | {r * 3}.50 EUR |" for r in range(rows)]
    return "\n".join(["| Item | Qty | Price |", "| --- | --- | --- |", *body])


# -- synthetic documents -------------------------------------------------------------------


def test_record_shape_and_place(tmp_path: Path) -> None:
    document = _finished([[Block(L.TEXT, "Costs fell by twelve percent.", _box(1))]])
    chunks = _write(tmp_path, document, 512)
    assert (tmp_path / "chunks" / "reports" / "q1.pdf.jsonl").is_file()
    assert len(chunks) == 1
    assert set(chunks[0]) == KEYS
    assert chunks[0]["doc_id"] == "doc1"
    assert chunks[0]["source_path"] == "reports/q1.pdf"
    assert chunks[0]["boxes"] == [{"page": 1, "bbox": list(_box(1))}]
    assert chunks[0]["n_tokens"] == 7


@pytest.mark.parametrize(
    ("text", "tokens"),
    [  # counts given by OpenAI's own tiktoken (Rust) for cl100k_base
        ("hello world", 2),
        ("Costs fell by twelve percent.", 7),
        ("Die Größe der Sammlung wächst jedes Jahr.", 13),
        ("| Item | Qty |\n| --- | --- |", 10),
        ("東京都の人口は約1400万人です。", 16),
        ("<|endoftext|>", 7),  # a marker in OCR text is plain text, never a special token
    ],
)
def test_counts_are_cl100k_base(text: str, tokens: int) -> None:
    assert count_tokens(text) == tokens


def test_table_larger_than_the_limit_stays_whole(tmp_path: Path) -> None:
    table = _table(40)
    assert count_tokens(table) > 200
    blocks = [
        Block(L.TEXT, SENTENCES[0], _box(1)),
        Block(L.TABLE, table, _box(2)),
        Block(L.TEXT, SENTENCES[1], _box(3)),
    ]
    chunks = _write(tmp_path, _finished([blocks]), 64)
    holding = [c for c in chunks if "item 0 |" in c["text"]]
    assert len(holding) == 1
    assert holding[0]["text"] == table
    assert holding[0]["labels"] == ["table"]
    assert holding[0]["n_tokens"] == count_tokens(table) > 64
    assert holding[0]["boxes"] == [{"page": 1, "bbox": list(_box(2))}]
    assert [c["text"] for c in chunks] == [SENTENCES[0], table, SENTENCES[1]]


def test_small_formula_shares_its_paragraphs_chunk(tmp_path: Path) -> None:
    blocks = [
        Block(L.TEXT, "The area of a circle is", _box(1)),
        Block(L.FORMULA, "$$A = \\pi r^2$$", _box(2)),
        Block(L.TEXT, "where r is its radius.", _box(3)),
    ]
    (chunk,) = _write(tmp_path, _finished([blocks]), 64)
    assert chunk["text"] == "The area of a circle is\n\n$$A = \\pi r^2$$\n\nwhere r is its radius."
    assert chunk["labels"] == ["text", "formula"]
    assert len(chunk["boxes"]) == 3


def test_section_header_starts_a_chunk_and_heads_it(tmp_path: Path) -> None:
    blocks = [
        Block(L.TITLE, "# Quarterly report", _box(0)),
        Block(L.TEXT, "The reading room received boxes.", _box(1)),
        Block(L.SECTION_HEADER, "## Costs", _box(2)),
        Block(L.TEXT, "Costs fell by twelve percent.", _box(3)),
    ]
    chunks = _write(tmp_path, _finished([blocks]), 512)
    assert [c["text"] for c in chunks] == [
        "The reading room received boxes.",
        "Costs fell by twelve percent.",
    ]
    assert [c["headings"] for c in chunks] == [["Quarterly report"], ["Quarterly report", "Costs"]]
    # Headings are in the path, not in the text, and their boxes are not the chunk's.
    assert [b["bbox"] for b in chunks[1]["boxes"]] == [list(_box(3))]


def test_heading_path_resets_at_a_higher_level(tmp_path: Path) -> None:
    blocks = [
        Block(L.TITLE, "# Report"),
        Block(L.SECTION_HEADER, "## Scanning"),
        Block(L.SECTION_HEADER, "### Scanners ###"),
        Block(L.TEXT, "one"),
        Block(L.SECTION_HEADER, "## Costs"),
        Block(L.TEXT, "two"),
        Block(L.SECTION_HEADER, "Staff"),  # no '#': a section header is level 2
        Block(L.TEXT, "three"),
        Block(L.TITLE, "Annex"),  # no '#': a title is level 1
        Block(L.TEXT, "four"),
    ]
    chunks = _write(tmp_path, _finished([blocks]), 512)
    assert [(c["text"], c["headings"]) for c in chunks] == [
        ("one", ["Report", "Scanning", "Scanners"]),
        ("two", ["Report", "Costs"]),
        ("three", ["Report", "Staff"]),
        ("four", ["Annex"]),
    ]


def test_long_paragraph_splits_at_sentence_ends(tmp_path: Path) -> None:
    paragraph = " ".join(SENTENCES[:30])
    assert count_tokens(paragraph) > 300
    chunks = _write(tmp_path, _finished([[Block(L.TEXT, paragraph, _box(5))]]), 64)
    assert len(chunks) >= 5
    for chunk in chunks:
        assert chunk["n_tokens"] == count_tokens(chunk["text"]) <= 64
        assert chunk["text"].startswith("Sentence number ")
        assert chunk["text"].endswith(" checked.")
        assert chunk["boxes"] == [{"page": 1, "bbox": list(_box(5))}]
    assert " ".join(c["text"] for c in chunks) == paragraph
    # Packed, not one sentence a chunk: each chunk could not take the next sentence.
    assert all(c["n_tokens"] + count_tokens(" " + SENTENCES[0]) > 64 for c in chunks[:-1])


def test_sentence_over_the_limit_splits_between_words() -> None:
    words = " ".join(f"word{i}" for i in range(200))  # no sentence end, no line break
    chunks = chunk_blocks([(1, [Block(L.TEXT, words)])], 32, count_tokens)
    assert len(chunks) > 3
    assert all(c.n_tokens <= 32 for c in chunks)
    assert " ".join(c.text for c in chunks) == words


def test_word_over_the_limit_splits_between_characters() -> None:
    blob = "x9" * 300  # one "word" of about 300 tokens
    chunks = chunk_blocks([(1, [Block(L.TEXT, blob)])], 40, count_tokens)
    assert all(0 < c.n_tokens <= 40 for c in chunks)
    assert "".join(c.text for c in chunks) == blob


def test_page_headers_and_footers_never_in_chunks(tmp_path: Path) -> None:
    pages = [
        [
            Block(L.PAGE_HEADER, "ACME confidential", _box(0)),
            Block(L.TEXT, f"Body of page {n}.", _box(2)),
            Block(L.PAGE_FOOTER, f"Page {n} of 3", _box(40)),
        ]
        for n in (1, 2, 3)
    ]
    (chunk,) = _write(tmp_path, _finished(pages), 512)
    assert chunk["text"] == "Body of page 1.\n\nBody of page 2.\n\nBody of page 3."
    assert chunk["pages"] == [1, 2, 3]
    assert chunk["boxes"] == [{"page": n, "bbox": list(_box(2))} for n in (1, 2, 3)]


def test_smaller_limit_gives_smaller_chunks(tmp_path: Path) -> None:
    blocks = [Block(L.TEXT, " ".join(SENTENCES[i : i + 3]), _box(i)) for i in range(0, 60, 3)]
    document = _finished([blocks[:10], blocks[10:]])
    big = _write(tmp_path / "big", document, 512)
    small = _write(tmp_path / "small", document, 64)
    assert len(small) > 2 * len(big)
    assert max(c["n_tokens"] for c in small) <= 64 < max(c["n_tokens"] for c in big)
    assert [c["chunk_index"] for c in small] == list(range(len(small)))
    # Whole blocks here (each under 64 tokens): each block is in exactly one chunk.
    texts = [c["text"] for c in small]
    assert all(sum(b.text in t for t in texts) == 1 for b in blocks)


def test_figure_links_and_pages_without_blocks(tmp_path: Path) -> None:
    figure = Figure(1, 0, "picture", (0.1, 0.1, 0.5, 0.5), description="A bar chart of costs.")
    page_one = PageResult(
        1,
        "Intro text.\n\n<!--figure:0-->",
        Route.ENGINE,
        figures=(figure,),
        blocks=(
            Block(L.TEXT, "Intro text.", _box(1)),
            Block(L.FIGURE, "<!--figure:0-->", figure.box),
        ),
    )
    # An engine that gives Markdown only: the page's blocks come from its structure.
    page_two = PageResult(2, "## Annex\n\nMarkdown only text.", Route.ENGINE)
    result = DocumentResult("doc1", "/in/a.pdf", DocStatus.OK, (page_one, page_two), page_count=2)
    document = FinishedDocument(result, DocumentMeta("a.pdf", "0" * 64, None, "e", "fp"))
    first, second = _write(tmp_path, document, 512)
    assert "![A bar chart of costs.](figures/doc1/p1-0.png)" in first["text"]
    assert "A bar chart of costs." in first["text"]
    assert first["labels"] == ["text", "figure"]
    assert second == {**second, "text": "Markdown only text.", "headings": ["Annex"], "boxes": []}


def test_failed_document_gets_no_file(tmp_path: Path) -> None:
    result = DocumentResult("doc1", "/in/x.pdf", DocStatus.FAILED, (), reason="corrupt")
    document = FinishedDocument(result, DocumentMeta("x.pdf", "0" * 64, None, "e", "fp"))
    ChunksSink(LocalStore(tmp_path)).write(document)
    assert not (tmp_path / "chunks").exists()


def test_limit_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        ChunksSink(LocalStore(tmp_path), max_tokens=0)
