from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

import pytest

from ocrflow.config import RouteOptions, RunConfig
from ocrflow.errors import OcrflowError, OutputError, WorkspaceError, first_error
from ocrflow.storage.local import LocalStore
from ocrflow.types import (
    DocStatus,
    DocumentResult,
    Figure,
    ImageSize,
    PageResult,
    PageStatus,
    Route,
)
from ocrflow.workspace.state import Workspace, store_write
from tests.mounts import fill, remount, tmpfs


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
    assert record is not None and record.status is DocStatus.PARTIAL
    assert record.pages[0].page == 1 and record.pages[0].route == "engine"
    stored = json.loads((tmp_path / ".ocrflow" / "done" / "d.json").read_text())
    assert "text" not in stored["pages"][0], "done markers never hold page text"
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


def test_a_write_to_a_full_disk_raises_output_error_and_leaves_no_trace(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "disk", "256k") as disk:
        store = LocalStore(disk / "out")
        store.write_bytes("results/a.jsonl", b"old")
        fill(disk, 16 * 1024)
        with pytest.raises(OutputError) as caught:
            store.write_bytes("results/a.jsonl", b"x" * 64 * 1024)
        assert str(caught.value) == (
            f"cannot write {disk}/out/results/a.jsonl: No space left on device"
        )
        assert store.read_bytes("results/a.jsonl") == b"old"  # the old object, whole
        with pytest.raises(OutputError, match="No space left on device"):
            store.create_exclusive("manifest/b.jsonl", b"y" * 64 * 1024)
        assert not store.exists("manifest/b.jsonl")
        assert not list((disk / "out" / ".ocrflow" / "tmp").iterdir())  # temp files removed


def test_a_read_only_out_can_be_read_but_not_written(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "disk", "256k") as disk:
        LocalStore(disk / "out").write_bytes(".ocrflow/done/d.json", b"{}")
        remount(disk, "ro")
        store = LocalStore(disk / "out")  # ``ocrflow status`` opens a read-only OUT
        assert store.list(".ocrflow/done") == [".ocrflow/done/d.json"]
        assert store.read_bytes(".ocrflow/done/d.json") == b"{}"
        with pytest.raises(
            OutputError, match=r"^cannot write .*/out/x\.md: Read-only file system$"
        ):
            store.write_bytes("x.md", b"x")
        with pytest.raises(OutputError, match=r"^cannot delete .*: Read-only file system$"):
            store.delete(".ocrflow/done/d.json")


def test_first_error_looks_into_groups_and_interrupted_errors() -> None:
    first = OutputError("/out/a.md", "No space left on device")
    second = OutputError("/out/.ocrflow/runs/r.json", "No space left on device")
    try:
        try:
            raise ExceptionGroup("tasks", [ValueError("other"), first])
        finally:
            raise second  # a cleanup write that failed too
    except OutputError as raised:
        assert raised is second
        assert first_error(raised, OutputError) is first
    bugs = ExceptionGroup("tasks", [ValueError("bug"), OcrflowError("ours")])
    assert first_error(bugs, OutputError) is None
    assert str(first_error(bugs, OcrflowError)) == "ours"


def test_page_checkpoints_keep_figure_crops_and_old_ones_still_load(tmp_path: Path) -> None:
    workspace = Workspace(LocalStore(tmp_path))
    figure = Figure(2, 0, "image", (0.1, 0.2, 0.6, 0.7), b"\x89PNG crop")
    page = PageResult(
        2, "x <!--figure:0-->", Route.ENGINE, figures=(figure,), image_size=ImageSize(640, 480)
    )
    workspace.save_pages("doc", [page])
    assert (tmp_path / ".ocrflow" / "pages" / "doc" / "fig-p2-0.png").read_bytes() == figure.png
    assert workspace.load_pages("doc") == {2: page}
    # A checkpoint written before pages carried figures and sizes.
    old = [{"page": 3, "text": "t", "route": "engine", "status": "ok", "attributes": {}}]
    (tmp_path / ".ocrflow" / "pages" / "doc" / "000003-000003.json").write_text(json.dumps(old))
    assert workspace.load_pages("doc")[3] == PageResult(3, "t", Route.ENGINE)
    # A crop lost from a checkpoint: that page is converted again rather than half-loaded.
    (tmp_path / ".ocrflow" / "pages" / "doc" / "fig-p2-0.png").unlink()
    assert set(workspace.load_pages("doc")) == {3}
    workspace.clear_pages("doc")
    assert not list((tmp_path / ".ocrflow" / "pages").rglob("*.*"))


class _GatedStore(LocalStore):
    """A store whose writes wait for the test to let them through."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.entered, self.gate = threading.Event(), threading.Event()

    def write_bytes(self, key: str, data: bytes) -> None:
        self.entered.set()
        assert self.gate.wait(10)
        super().write_bytes(key, data)


def test_a_cancelled_checkpoint_write_lands_before_the_cancellation_goes_on(
    tmp_path: Path,
) -> None:
    # A worker that lost its lease is cancelled, then drops the checkpoints it wrote late:
    # a write still in its thread at that moment would land after the cleanup and stay.
    store = _GatedStore(tmp_path)
    ws = Workspace(store)
    pages = [PageResult(3, "late", Route.ENGINE)]

    async def scenario() -> bool:
        write = asyncio.create_task(store_write(ws.save_pages, "doc", pages))
        assert await asyncio.to_thread(store.entered.wait, 10)
        write.cancel()
        await asyncio.sleep(0.1)
        write.cancel()  # a second cancellation does not cut the wait short either
        await asyncio.sleep(0.1)
        waited = not write.done()
        store.gate.set()
        with pytest.raises(asyncio.CancelledError):
            await write
        return waited

    assert asyncio.run(scenario())  # a bare store_call is done at the first cancel
    assert {n: p.text for n, p in ws.load_pages("doc").items()} == {3: "late"}
    ws.clear_pages("doc")  # the cleanup that follows now finds it
    assert ws.load_pages("doc") == {}
