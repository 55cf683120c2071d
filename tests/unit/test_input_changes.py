"""Stamps and manifest versions: the cheap check that tells a rerun which sources changed."""

from __future__ import annotations

import os
from pathlib import Path

from ocrflow.executors.input_changes import refresh_changed
from ocrflow.inputs.source import Source
from ocrflow.pipeline.documents import content_hash, document_id
from ocrflow.storage.local import LocalStore
from ocrflow.types import DocStatus, DocumentResult
from ocrflow.workspace.state import Workspace
from ocrflow.workspace.workitems import (
    Manifest,
    document_items,
    join_item,
    range_items,
    source_stamp,
)


def _source(path: Path) -> Source:
    return Source(str(path), path.name, "pdf", path.stat().st_size)


def test_stamp_follows_size_and_times(tmp_path: Path) -> None:
    path = tmp_path / "a.pdf"
    path.write_bytes(b"%PDF-1 one")
    first = source_stamp(_source(path))
    assert source_stamp(_source(path)) == first
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert source_stamp(_source(path)) != first
    remote = Source("s3://b/a.pdf", "a.pdf", "pdf", 10)
    assert source_stamp(remote) == source_stamp(remote)


def test_the_newest_version_of_an_item_wins(tmp_path: Path) -> None:
    manifest = Manifest(LocalStore(tmp_path))
    item = document_items([(Source("/in/a", "a", "pdf", 1), "a")], "fp")[0]
    manifest.extend([item])
    manifest.restamp([item.model_copy(update={"version": 1, "stamp": "new", "size": 7})])
    manifest.restamp([item.model_copy(update={"version": 1, "stamp": "new", "size": 7})])
    assert manifest.extend([item]) == 0
    (current,) = manifest.items()
    assert (current.version, current.stamp, current.size) == (1, "new", 7)


def test_forget_split_drops_ranges_and_completion(tmp_path: Path) -> None:
    manifest = Manifest(LocalStore(tmp_path))
    parent = document_items([(Source("/in/l", "l", "pdf", 1), "l")], "fp")[0]
    ranges = manifest.split(parent, range_items(parent, "doc", (1, 2, 3), 2))
    for item in (parent, *ranges, join_item(ranges)):
        manifest.mark_item_done(item, "doc", "done")
    manifest.forget_split(parent.item_id)
    assert manifest.done_item_ids() == set() and manifest.splits() == []


def test_a_touched_file_is_restamped_not_forgotten(tmp_path: Path) -> None:
    path = tmp_path / "a.pdf"
    path.write_bytes(b"%PDF-1 same bytes")
    workspace = Workspace(LocalStore(tmp_path / "out"))
    manifest = Manifest(workspace.store)
    (item,) = document_items([(_source(path), "a.pdf")], "fp")
    manifest.extend([item])
    doc_id = document_id(content_hash(str(path)), "fp", "a.pdf")
    workspace.mark_done(DocumentResult(doc_id, str(path), DocStatus.OK))
    manifest.mark_item_done(item, doc_id, "done")
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))

    (touched,) = document_items([(_source(path), "a.pdf")], "fp")
    assert refresh_changed(workspace, [touched], "fp") == []
    assert workspace.done_ids() == {doc_id} and manifest.item_done(item.item_id) is not None
    assert manifest.items()[0].stamp == touched.stamp  # not hashed again next time

    path.write_bytes(b"%PDF-1 other bytes")
    (changed,) = document_items([(_source(path), "a.pdf")], "fp")
    assert refresh_changed(workspace, [changed], "fp") == [changed]
    assert workspace.done_ids() == set() and manifest.item_done(item.item_id) is None
    assert manifest.items()[0].version == 2
