from __future__ import annotations

from pathlib import Path

from ocrflow.inputs.source import Source
from ocrflow.storage.local import LocalStore
from ocrflow.workspace.workitems import (
    Manifest,
    document_items,
    item_id_for,
    join_item,
    range_items,
)


def _sources(*names: str) -> list[tuple[Source, str]]:
    return [(Source(f"/in/{n}", n, "pdf", 10), n) for n in names]


def test_manifest_extends_without_duplicates(tmp_path: Path) -> None:
    manifest = Manifest(LocalStore(tmp_path))
    assert manifest.extend(document_items(_sources("a.pdf", "b.pdf"), "fp")) == 2
    assert manifest.extend(document_items(_sources("a.pdf", "b.pdf"), "fp")) == 0
    assert manifest.extend(document_items(_sources("b.pdf", "c.pdf"), "fp")) == 1
    assert sorted(i.rel for i in manifest.items()) == ["a.pdf", "b.pdf", "c.pdf"]


def test_item_ids_are_stable_and_setting_dependent() -> None:
    assert item_id_for("/in/a", "a", "fp") == item_id_for("/in/a", "a", "fp")
    assert item_id_for("/in/a", "a", "fp") != item_id_for("/in/a", "a", "fp2")


def test_ranges_cover_selected_pages_once_and_first_split_wins(tmp_path: Path) -> None:
    manifest = Manifest(LocalStore(tmp_path))
    parent = document_items(_sources("long.pdf"), "fp")[0]
    pages = tuple(range(1, 1001))
    ranges = range_items(parent, "doc", pages, 300)
    assert [(r.first, r.last) for r in ranges] == [(1, 300), (301, 600), (601, 900), (901, 1000)]
    assert manifest.split(parent, ranges) == ranges
    other = range_items(parent, "doc", pages, 500)
    assert manifest.split(parent, other) == ranges  # a second splitter adopts the first split
    (recorded,) = manifest.splits()
    assert all(r.is_range and r.doc_id == "doc" for r in recorded)


def test_done_items_and_clear(tmp_path: Path) -> None:
    manifest = Manifest(LocalStore(tmp_path))
    parent = document_items(_sources("long.pdf"), "fp")[0]
    ranges = manifest.split(parent, range_items(parent, "doc", (1, 2, 3), 2))
    join = join_item(ranges)
    for item in (parent, *ranges, join):
        manifest.mark_item_done(item, "doc", "done")
    assert manifest.done_item_ids() == {parent.item_id, join.item_id, *(r.item_id for r in ranges)}
    manifest.clear_item(parent.item_id)
    assert manifest.done_item_ids() == set()


def test_a_split_document_joins_once_its_ranges_are_done(tmp_path: Path) -> None:
    manifest = Manifest(LocalStore(tmp_path))
    parent = document_items(_sources("long.pdf"), "fp")[0]
    manifest.extend([parent])
    assert [i.item_id for i in manifest.open_items()] == [parent.item_id]
    manifest.mark_item_done(parent, "doc", "split")
    first, second = manifest.split(parent, range_items(parent, "doc", (1, 2, 3), 2))
    join = join_item([first, second])
    assert (join.is_join, join.is_range, join.doc_id) == (True, False, "doc")
    assert join.shard(7) == parent.shard(7)  # a static shard keeps its document whole
    assert {i.item_id for i in manifest.open_items()} == {first.item_id, second.item_id}
    assert (manifest.unfinished(), manifest.unfinished_documents()) == (3, 1)
    manifest.mark_item_done(first, "doc", "range")
    assert [i.item_id for i in manifest.open_items()] == [second.item_id]
    # The last range done, the join is the one open item: until it is done, so is the run.
    manifest.mark_item_done(second, "doc", "range")
    assert [i.item_id for i in manifest.open_items()] == [join.item_id]
    assert manifest.unfinished() == manifest.unfinished_documents() == 1
    manifest.mark_item_done(join, "doc", "done")
    assert manifest.open_items() == [] and manifest.unfinished() == 0


def test_shards_partition_items() -> None:
    items = document_items(_sources(*(f"{n}.pdf" for n in range(200))), "fp")
    shards = [[i for i in items if i.shard(3) == s] for s in range(3)]
    assert sum(len(s) for s in shards) == 200 and all(shards)
