from __future__ import annotations

import json
from pathlib import Path

import pytest

from ocrflow.sinks import (
    DocumentMeta,
    FinishedDocument,
    JsonlSink,
    MarkdownSink,
    assemble_text,
    dolma_record,
    markdown_key,
    render_markdown,
    safe_relpath,
)
from ocrflow.storage.local import LocalStore
from ocrflow.types import DocStatus, DocumentResult, PageResult, PageStatus, Route

PAGES = (
    PageResult(2, "  second page\n", Route.ENGINE),
    PageResult(1, "First page text.", Route.TEXT_LAYER),
    PageResult(3, "", Route.BLANK),
    PageResult(4, "Über café", Route.FALLBACK, PageStatus.OK),
)


def test_spans_index_page_texts_exactly() -> None:
    text, spans = assemble_text(PAGES)
    by_page = {p.page: p.text.strip() for p in PAGES}
    assert [s[2] for s in spans] == [1, 2, 3, 4]
    for start, end, page in spans:
        assert text[start:end] == by_page[page]
    assert spans[-1][1] == len(text)


def test_dolma_record_fields() -> None:
    result = DocumentResult("abc", "/in/x.pdf", DocStatus.OK, PAGES, page_count=4)
    meta = DocumentMeta("x.pdf", "f" * 64, 0.0, "embedded", "fp")
    record = dolma_record(result, meta)
    assert set(record) == {"id", "text", "source", "added", "created", "metadata", "attributes"}
    assert record["metadata"]["routes"] == {
        "text_layer": 1,
        "engine": 1,
        "blank": 1,
        "fallback": 1,
    }
    assert record["attributes"]["page_routes"][0][2] == "text_layer"
    assert record["added"].endswith("Z")


def test_markdown_page_markers() -> None:
    marked = render_markdown(PAGES, page_separator=True)
    assert (
        marked.index("<!-- page 1 -->") < marked.index("First page") < marked.index("<!-- page 2")
    )
    assert "<!--" not in render_markdown(PAGES, page_separator=False)


@pytest.mark.parametrize(
    ("rel", "expected"),
    [
        ("../../etc/passwd", "etc/passwd"),
        ("/abs/path.pdf", "abs/path.pdf"),
        ("a/../../b.pdf", "a/b.pdf"),
        ("..\\..\\win.pdf", "win.pdf"),
        ("..", "document"),
        ("x\x00y\n.pdf", "x_y_.pdf"),
        (".hidden/.pdf", "hidden/pdf"),
    ],
)
def test_safe_relpath(rel: str, expected: str) -> None:
    assert safe_relpath(rel) == expected


def _write_both(store: LocalStore, result: DocumentResult, meta: DocumentMeta) -> None:
    for sink in (MarkdownSink(store, page_separator=False), JsonlSink(store)):
        sink.write(FinishedDocument(result, meta))


def test_sink_never_writes_outside_out(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = DocumentResult("id1", "src", DocStatus.OK, PAGES[1:2], 1)
    _write_both(LocalStore(out), result, DocumentMeta("../../../escape.pdf", "0", None, "e", "fp"))
    written = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert written == ["out/markdown/escape.pdf.md", "out/results/id1.jsonl"]
    assert markdown_key("../../../escape.pdf") == "markdown/escape.pdf.md"
    line = (out / "results" / "id1.jsonl").read_text()
    assert json.loads(line)["text"] == "First page text."


def test_sink_writes_a_long_multibyte_name(tmp_path: Path) -> None:
    # A legal 253-byte source name: the Markdown name adds ".md", past the 255-byte limit
    # unless names are capped in bytes (they once were cut at 180 characters).
    rel = "報告" * 41 + "文.pdf"
    result = DocumentResult("id2", "src", DocStatus.OK, PAGES[1:2], 1)
    _write_both(LocalStore(tmp_path), result, DocumentMeta(rel, "0", None, "e", "fp"))
    [written] = (tmp_path / "markdown").iterdir()
    assert len(written.name.encode()) <= 255 and written.name.endswith(".pdf.md")
    assert written.read_text() == "First page text.\n"
