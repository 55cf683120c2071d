"""Reading runs for evaluation: bench folders with repeats, name matching, truth files."""

from __future__ import annotations

import json
from pathlib import Path

from ocrflow.evaluation.bench import parse_test
from ocrflow.evaluation.documents import load_run, resolve_name
from ocrflow.evaluation.evaluate import evaluate_run, evaluate_tests, find_truth
from ocrflow.sinks import DocumentMeta, FinishedDocument, JsonlSink
from ocrflow.storage.local import LocalStore
from ocrflow.types import DocStatus, DocumentResult, PageResult, Route
from ocrflow.workspace.state import Workspace


def test_repeats_pass_by_majority(tmp_path: Path) -> None:
    sub = tmp_path / "sub"
    sub.mkdir()
    for repeat, text in enumerate(["hello there", "hello there", "goodbye"], start=1):
        (sub / f"doc_pg2_repeat{repeat}.md").write_text(text)
    (tmp_path / "other_pg1_repeat1.md").write_text("only one")
    docs = load_run(str(tmp_path))
    assert set(docs.pages) == {"sub/doc.pdf", "other.pdf"} and docs.repeats == 3
    tests = [
        parse_test(
            {"id": "a", "pdf": "sub/doc.pdf", "page": 2, "type": "present", "text": "hello"}
        ),
        parse_test({"id": "b", "pdf": "doc.pdf", "page": 2, "type": "present", "text": "goodbye"}),
        parse_test({"id": "c", "pdf": "other.pdf", "page": 3, "type": "baseline"}),
    ]
    a, b, c = evaluate_tests(tests, docs)
    assert (a.passed, a.explanation) == (True, "")  # two repeats of three
    assert not b.passed and "goodbye" in b.explanation  # one repeat of three
    assert (c.passed, c.explanation) == (False, "missing page")


def test_ocrflow_records_are_cut_into_pages(tmp_path: Path) -> None:
    # A real OUT: the JSONL sink's record and the workspace's done marker.
    store = LocalStore(tmp_path)
    pages = (
        PageResult(1, "Page one text", Route.ENGINE),
        PageResult(2, "Page two text", Route.ENGINE),
    )
    for doc_id, rel in (("x", "in/a.pdf"), ("y", "in/unfinished.pdf")):
        result = DocumentResult(doc_id, f"/{rel}", DocStatus.OK, pages, 2)
        meta = DocumentMeta(rel, "0" * 64, None, "embedded", "fp")
        JsonlSink(store).write(FinishedDocument(result, meta))
        if doc_id == "x":  # a record without a done marker is of a document still at work
            Workspace(store).mark_done(result, rel=rel)
    record = json.loads((tmp_path / "results" / "x.jsonl").read_text())
    assert record["attributes"]["pdf_page_numbers"] == [[0, 13, 1], [15, 28, 2]]
    docs = load_run(str(tmp_path))
    assert docs.pages == {"in/a.pdf": {1: ["Page one text"], 2: ["Page two text"]}}
    truth = tmp_path / "gt"
    truth.mkdir()
    (truth / "a.gt.txt").write_text("Page one text Page two text")
    result = evaluate_run(docs, [], truth)
    assert result.overall is not None and result.overall.cer == 0.0
    assert [d.truth for d in result.documents] == ["a.gt.txt"]


def test_resolve_name() -> None:
    names = ["pdfs/a.pdf", "b.pdf", "x/c.pdf", "y/c.pdf"]
    assert resolve_name("pdfs/a.pdf", names) == "pdfs/a.pdf"
    assert resolve_name("corpus/pdfs/a.pdf", names) == "pdfs/a.pdf"
    assert resolve_name("a.pdf", names) == "pdfs/a.pdf"
    assert resolve_name("top/b.pdf", names) == "b.pdf"
    assert resolve_name("c.pdf", names) is None  # ambiguous
    assert resolve_name("z.pdf", names) is None


def test_find_truth_prefers_the_exact_stem(tmp_path: Path) -> None:
    for name in ["doc.json", "doc.easyocr-reference.md", "doc_rotated.txt", "d[1].txt"]:
        (tmp_path / name).write_text("x")
    assert find_truth("pdfs/doc.pdf", tmp_path).name == "doc.easyocr-reference.md"
    (tmp_path / "doc.txt").write_text("x")
    assert find_truth("pdfs/doc.pdf", tmp_path).name == "doc.txt"
    assert find_truth("d[1].pdf", tmp_path).name == "d[1].txt"
    assert find_truth("nothing.pdf", tmp_path) is None
