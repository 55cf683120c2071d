from __future__ import annotations

from pathlib import Path

import pytest

from ocrflow.config import RouteOptions, RunConfig
from ocrflow.errors import WorkspaceError
from ocrflow.storage import LocalStore
from ocrflow.types import DocStatus, DocumentResult, PageResult, PageStatus, Route
from ocrflow.workspace import Workspace


def _config(**kw: object) -> RunConfig:
    return RunConfig(inputs=("x",), output="out", **kw)  # type: ignore[arg-type]


def test_bind_refuses_other_settings(tmp_path: Path) -> None:
    ws = Workspace(LocalStore(tmp_path))
    fp = ws.bind(_config())
    assert ws.bind(_config(render={"workers": 7})) == fp  # workers do not change outputs
    with pytest.raises(WorkspaceError, match="text_layer"):
        ws.bind(_config(route=RouteOptions(text_layer="off")))


def test_page_checkpoints_roundtrip_and_clear(tmp_path: Path) -> None:
    ws = Workspace(LocalStore(tmp_path))
    pages = [
        PageResult(1, "a", Route.ENGINE, attempts=2, attributes={"rotation": 90}),
        PageResult(2, "", Route.NONE, PageStatus.FAILED, error="boom", reason="timeout"),
    ]
    ws.save_pages("doc", pages)
    ws.save_pages("doc", [PageResult(9, "z", Route.TEXT_LAYER)])
    loaded = ws.load_pages("doc")
    assert loaded == {1: pages[0], 2: pages[1], 9: PageResult(9, "z", Route.TEXT_LAYER)}
    ws.clear_pages("doc")
    assert ws.load_pages("doc") == {}


def test_done_marker(tmp_path: Path) -> None:
    ws = Workspace(LocalStore(tmp_path))
    assert ws.done_record("d") is None
    result = DocumentResult(
        "d", "s", DocStatus.PARTIAL, (PageResult(1, "t", Route.ENGINE),), 3, "page_errors", "1 of 3"
    )
    ws.mark_done(result)
    record = ws.done_record("d")
    assert record is not None and record["status"] == "partial"
    assert "text" not in record["pages"][0]
    ws.clear_done("d")
    assert ws.done_record("d") is None


def test_store_is_atomic_and_exclusive(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    assert store.create_exclusive("a/b.json", b"1")
    assert not store.create_exclusive("a/b.json", b"2")
    assert store.read_bytes("a/b.json") == b"1"
    store.write_bytes("a/b.json", b"3")
    assert store.read_bytes("a/b.json") == b"3"
    assert store.list("a") == ["a/b.json"]
    assert not [p for p in (tmp_path / ".ocrflow" / "tmp").iterdir()]
    with pytest.raises(WorkspaceError):
        store.write_bytes("../escape", b"x")
