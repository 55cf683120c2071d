"""Typed workspace records: one definition each, and workspaces written by older ocrflow
versions (the dict shapes of the previous main, byte for byte) still read and resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from ocrflow.observe.status import collect_status
from ocrflow.storage.local import LocalStore
from ocrflow.types import DocStatus, DocumentResult, PageResult, Route
from ocrflow.workspace.leases import LeaseManager
from ocrflow.workspace.records import DoneRecord, ItemDone, LeaseRecord, RunRecord, WorkItem
from ocrflow.workspace.state import Workspace, result_from_done
from ocrflow.workspace.workitems import Manifest

# What the previous main wrote (json.dumps of its dicts), per record kind.
OLD_DONE = {
    "doc_id": "abc",
    "source": "/in/a.pdf",
    "status": "partial",
    "reason": "page_errors",
    "message": "1 of 2 pages failed",
    "page_count": 2,
    "pages": [
        {"page": 1, "route": "text_layer", "status": "ok", "attempts": 0, "error": None,
         "reason": None, "tokens_in": 0, "tokens_out": 0, "latency_s": 0.0, "attributes": {}},
        {"page": 2, "route": "engine", "status": "failed", "attempts": 3, "error": "boom",
         "reason": "engine_error", "tokens_in": 10, "tokens_out": 5, "latency_s": 1.5,
         "attributes": {"rotation": 0}},
    ],
    "finished": 1700000000.0,
    "rel": "a.pdf",
    "content_sha256": "00ff",
}  # fmt: skip
OLD_ITEM = {"item_id": "i1", "uri": "/in/a.pdf", "rel": "a.pdf", "kind": "pdf", "size": 9,
            "first": 0, "last": 0, "doc_id": ""}  # fmt: skip
OLD_ITEM_DONE = {"item_id": "i1", "doc_id": "abc", "status": "done"}
OLD_RUN = {"run_id": "r1", "worker": "h:1:ab", "started": 1.0, "finished": 3.0, "elapsed_s": 2.0,
           "documents": {"partial": 1}, "documents_skipped": 0, "pages": {"ok": 1, "failed": 1},
           "routes": {"engine": 1, "text_layer": 1}, "pages_per_s": 1.0, "tokens_in": 10,
           "tokens_out": 5, "tokens_out_per_s": 2.5, "heartbeat": 2.5}  # fmt: skip
OLD_LEASE = {"owner": "other-host:12:ab", "expires": 4102444800.0, "ttl_s": 120.0}


def _old_workspace(root: Path) -> None:
    state = root / ".ocrflow"
    for folder, name, record in (
        ("done", "abc.json", OLD_DONE),
        ("items", "i1.json", OLD_ITEM_DONE),
        ("runs", "r1.json", OLD_RUN),
        ("leases", "i2.json", OLD_LEASE),
    ):
        (state / folder).mkdir(parents=True, exist_ok=True)
        (state / folder / name).write_text(json.dumps(record))
    (state / "manifest").mkdir()
    item2 = {**OLD_ITEM, "item_id": "i2", "uri": "/in/b.pdf", "rel": "b.pdf"}
    lines = json.dumps(OLD_ITEM) + "\n" + json.dumps(item2) + "\n"
    (state / "manifest" / "m.jsonl").write_text(lines)


def test_an_old_workspace_reads_as_typed_records(tmp_path: Path) -> None:
    _old_workspace(tmp_path)
    store = LocalStore(tmp_path)
    workspace = Workspace(store)
    done = workspace.done_record("abc")
    assert done is not None and done.status is DocStatus.PARTIAL
    assert [p.route for p in done.pages] == ["text_layer", "engine"]
    assert done.pages[1].tokens_in == 10 and done.rel == "a.pdf"
    assert result_from_done(done).reason == "page_errors"
    manifest = Manifest(store)
    assert [i.item_id for i in manifest.items()] == ["i1", "i2"]
    assert manifest.item_done("i1") == ItemDone(item_id="i1", doc_id="abc", status="done")
    assert workspace.run_records()[0].heartbeat == 2.5
    assert LeaseManager(store, "me").claim("i2") is None, "another host's unexpired lease holds"


def test_status_of_an_old_workspace(tmp_path: Path) -> None:
    _old_workspace(tmp_path)
    report = collect_status(Workspace(LocalStore(tmp_path)))
    assert report["documents"] == {"partial": 1, "pending": 1}
    assert report["pages"] == {"ok": 1, "failed": 1}
    assert report["tokens"] == {"in": 10, "out": 5}
    assert report["failures"][0]["reason"] == "page_errors"
    assert report["active_leases"][0]["owner"] == "other-host:12:ab"


def test_records_round_trip_and_ignore_fields_they_do_not_know() -> None:
    for model, data in (
        (DoneRecord, OLD_DONE),
        (WorkItem, OLD_ITEM),
        (ItemDone, OLD_ITEM_DONE),
        (RunRecord, OLD_RUN),
        (LeaseRecord, OLD_LEASE),
    ):
        record = model.model_validate({**data, "written_by_a_newer_version": True})
        assert model.load(record.dump()) == record


def test_records_are_validated() -> None:
    with pytest.raises(ValidationError):
        DoneRecord.model_validate({**OLD_DONE, "status": "half-done"})
    with pytest.raises(ValidationError):
        ItemDone(item_id="i", doc_id="d", status="maybe")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        WorkItem.model_validate({"item_id": "x"})


def test_mark_done_writes_a_typed_marker(tmp_path: Path) -> None:
    workspace = Workspace(LocalStore(tmp_path))
    result = DocumentResult("d1", "/x.pdf", DocStatus.OK, (PageResult(1, "hi", Route.ENGINE),), 1)
    workspace.mark_done(result, rel="x.pdf", content_sha256="ab")
    record = DoneRecord.load((tmp_path / ".ocrflow" / "done" / "d1.json").read_bytes())
    assert record.rel == "x.pdf" and record.pages[0].route == "engine"
    assert workspace.done_ids() == {"d1"}
