"""An OUT written before pages carried blocks (``tests/data/old_out``, made by the previous
main: one finished scan, one ten-page PDF killed after its first checkpoint) resumes with
today's code and reads back as documents; the pages converted now carry blocks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from ocrflow.document import Document, blocks_from_rows, document_from_result
from ocrflow.storage.local import LocalStore
from ocrflow.types import DocStatus, DocumentResult, PageResult, Route
from ocrflow.workspace.state import Workspace

from .cli_helpers import ocrflow, results

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "old_out"
MARK = " (from the old checkpoint)"


def _copy(tmp_path: Path) -> Path:
    for name in ("in", "out"):
        shutil.copytree(FIXTURE / name, tmp_path / name)
    return tmp_path / "out"


def _document(record: dict[str, Any]) -> Document:
    """A JSONL record as a ``Document`` (its spans cut the text into pages; blocks where
    the record has them)."""
    attributes = record["attributes"]
    blocks = {s[1]: s[2] for s in attributes.get("page_blocks", [])}
    routes = {s[1]: s[2] for s in attributes["page_routes"]}
    pages = tuple(
        PageResult(
            number,
            record["text"][start:end],
            Route(routes[end]),
            blocks=blocks_from_rows(blocks.get(end)),
        )
        for start, end, number in attributes["pdf_page_numbers"]
    )
    result = DocumentResult(record["id"], record["metadata"]["Source-File"], DocStatus.OK, pages)
    return document_from_result(result, record["metadata"])


def test_an_old_out_resumes_and_reads_back(tmp_path: Path) -> None:
    out = _copy(tmp_path)
    workspace = Workspace(LocalStore(out))
    (old_done,) = workspace.done_records()
    assert all(page.blocks == [] for page in old_done.pages), "old markers load without blocks"
    (doc_dir,) = (out / ".ocrflow" / "pages").iterdir()
    saved = workspace.load_pages(doc_dir.name)
    assert sorted(saved) == list(range(1, 9)) and all(p.blocks == () for p in saved.values())
    # Mark the checkpointed text: the resumed outputs show whether it was used.
    checkpoint = next(doc_dir.glob("*.json"))
    pages = json.loads(checkpoint.read_text())
    pages[0]["text"] += MARK
    checkpoint.write_text(json.dumps(pages))
    note_marker = (out / ".ocrflow" / "done" / f"{old_done.doc_id}.json").read_bytes()

    done = ocrflow("run", str(tmp_path / "in"), "-o", str(out), "--workers", "1", "--json", "-q")
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    assert summary["documents_skipped"] == 1 and summary["documents"] == {"ok": 2}
    assert (out / ".ocrflow" / "done" / f"{old_done.doc_id}.json").read_bytes() == note_marker
    assert not any((out / ".ocrflow" / "pages").rglob("*.json")), "checkpoints cleared"

    documents = {Path(r["metadata"]["source_path"]).name: _document(r) for r in results(out)}
    note, report = documents["note.png"], documents["report.pdf"]
    assert note.markdown == (out / "markdown" / "note.png.md").read_text().strip()
    assert [p.blocks for p in note.pages] == [()], "the old record has no blocks"
    assert [p.number for p in report.pages] == list(range(1, 11))
    assert report.pages[0].markdown == f"Report page 1 of ten\nThe ledger line 1 is balanced{MARK}"
    assert all(p.blocks == () for p in report.pages[:8]), "pages from the old checkpoint"
    for page in report.pages[8:]:  # converted by today's code: text-layer lines with boxes
        (block,) = page.blocks
        assert block.text == page.markdown and len(block.lines) == 2
        assert block.bbox is not None and 0 < block.bbox[0] < block.bbox[2] < 1
    markers = {r.doc_id: r for r in Workspace(LocalStore(out)).done_records()}
    new_marker = markers[report.id]
    assert [len(p.blocks) for p in new_marker.pages] == [0] * 8 + [1, 1]
    assert blocks_from_rows(new_marker.pages[9].blocks) == report.pages[9].blocks
