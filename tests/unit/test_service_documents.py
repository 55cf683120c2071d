"""``service/documents.py``: a document's pages with their route, fallback mark and text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ocrflow.service.documents import DocumentNotFound, document_view, list_documents
from ocrflow.sinks.jsonl import assemble_text
from ocrflow.storage.open import open_store
from ocrflow.types import DocStatus, DocumentResult, PageResult, PageStatus, Route
from ocrflow.workspace.state import Workspace

DOC = "0f" * 8


def _write(out: Path) -> None:
    pages = (
        PageResult(1, "# Title\n\nBody **bold**", Route.ENGINE),
        PageResult(2, "cpu text", Route.FALLBACK, reason="unparsable", attempts=8),
        PageResult(3, "", Route.NONE, PageStatus.FAILED, reason="render_timeout"),
    )
    result = DocumentResult(DOC, "/in/scan.pdf", DocStatus.PARTIAL, pages, 3, "fallback_pages")
    text, spans = assemble_text(pages, DOC)
    (out / "results").mkdir(parents=True)
    record = {"id": DOC, "text": text, "attributes": {"pdf_page_numbers": spans}}
    (out / "results" / f"{DOC}.jsonl").write_text(json.dumps(record) + "\n")
    Workspace(open_store(str(out))).mark_done(result, rel="scan.pdf")


def test_fallback_and_failed_pages_are_marked(tmp_path: Path) -> None:
    _write(tmp_path)
    [summary] = list_documents(tmp_path)
    assert summary | {"id": DOC} == {
        "id": DOC, "name": "scan.pdf", "status": "partial", "reason": "fallback_pages",
        "pages": 3, "fallback_pages": 1, "failed_pages": 1,
    }  # fmt: skip
    pages = document_view(tmp_path, DOC)["page_list"]
    assert [(p["route"], p["status"], p["fallback"], p["reason"]) for p in pages] == [
        ("engine", "ok", False, None),
        ("fallback", "ok", True, "unparsable"),
        ("none", "failed", False, "render_timeout"),
    ]
    assert "<h1>Title</h1>" in pages[0]["html"] and "<strong>bold</strong>" in pages[0]["html"]
    assert pages[1]["html"] == "<p>cpu text</p>\n"


@pytest.mark.parametrize("doc_id", ["", "../x", "0F0F", "a" * 16])
def test_unknown_or_odd_ids_are_not_found(tmp_path: Path, doc_id: str) -> None:
    _write(tmp_path)
    with pytest.raises(DocumentNotFound):
        document_view(tmp_path, doc_id)
