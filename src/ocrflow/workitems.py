"""Work items: what a run must do, built once from the inputs and shared by every worker.

An item is a whole document, or — for a very long one — a range of its pages, so a
3,000-page PDF does not sit on one worker. Items are named by the document's place in the
inputs (not its bytes), so a worker can tell an item is done without downloading it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable

from ocrflow.records import ItemDone, ItemStatus, WorkItem, dump_lines, dump_list
from ocrflow.sources import Source
from ocrflow.storage import Store

__all__ = ["ItemDone", "Manifest", "WorkItem", "document_items", "item_id_for", "range_items"]

MANIFEST_DIR = ".ocrflow/manifest"
RANGES_DIR = ".ocrflow/ranges"
ITEMS_DONE_DIR = ".ocrflow/items"
_SHARD_ITEMS = 5000


def item_id_for(uri: str, rel: str, fingerprint: str) -> str:
    """The id of a document item: where the document is and the settings, not its bytes."""
    return hashlib.sha256(f"{fingerprint}\0{rel}\0{uri}".encode()).hexdigest()[:24]


def document_items(sources: Iterable[tuple[Source, str]], fingerprint: str) -> list[WorkItem]:
    """One item per (source, unique relative name)."""
    return [
        WorkItem(
            item_id=item_id_for(s.uri, rel, fingerprint),
            uri=s.uri,
            rel=rel,
            kind=s.kind,
            size=s.size,
        )
        for s, rel in sources
    ]


def range_items(parent: WorkItem, doc_id: str, pages: tuple[int, ...], span: int) -> list[WorkItem]:
    """Split a long document's selected pages into items of at most ``span`` pages."""
    chunks = [pages[i : i + span] for i in range(0, len(pages), span)]
    return [
        parent.model_copy(
            update={
                "item_id": f"{parent.item_id}@{c[0]}-{c[-1]}",
                "first": c[0],
                "last": c[-1],
                "doc_id": doc_id,
            }
        )
        for c in chunks
    ]


class Manifest:
    """The items of a run, stored as immutable shards under ``.ocrflow/manifest``.

    Adding inputs later writes a new shard holding only the new items; shards are created
    with create-if-absent, so concurrent writers never clobber each other.
    """

    def __init__(self, store: Store) -> None:
        self.store = store

    def items(self) -> list[WorkItem]:
        """Every document item of every shard, in a stable order, without duplicates."""
        seen: dict[str, WorkItem] = {}
        for key in self.store.list(MANIFEST_DIR):
            for line in (self.store.read_bytes(key) or b"").splitlines():
                if line.strip():
                    item = WorkItem.load(line)
                    seen.setdefault(item.item_id, item)
        return list(seen.values())

    def extend(self, items: list[WorkItem]) -> int:
        """Record the items not recorded yet; returns how many were new."""
        known = {i.item_id for i in self.items()}
        new = [i for i in items if i.item_id not in known]
        for start in range(0, len(new), _SHARD_ITEMS):
            shard = new[start : start + _SHARD_ITEMS]
            digest = hashlib.sha256("".join(i.item_id for i in shard).encode()).hexdigest()[:16]
            self.store.create_exclusive(f"{MANIFEST_DIR}/{digest}.jsonl", dump_lines(shard))
        return len(new)

    # -- ranges of long documents -------------------------------------------------------
    def split(self, parent: WorkItem, ranges: list[WorkItem]) -> list[WorkItem]:
        """Record how a long document is split; the first recorded split wins."""
        self.store.create_exclusive(f"{RANGES_DIR}/{parent.item_id}.json", dump_list(ranges))
        return self.ranges(parent.item_id) or ranges

    def ranges(self, parent_id: str) -> list[WorkItem]:
        """The range items a document was split into, or ``[]``."""
        blob = self.store.read_bytes(f"{RANGES_DIR}/{parent_id}.json")
        return [WorkItem.model_validate(r) for r in json.loads(blob)] if blob else []

    def all_ranges(self) -> list[WorkItem]:
        """Every range item of every split document."""
        found = []
        for key in self.store.list(RANGES_DIR):
            blob = self.store.read_bytes(key) or b"[]"
            found.extend(WorkItem.model_validate(r) for r in json.loads(blob))
        return found

    # -- item completion ----------------------------------------------------------------
    def mark_item_done(self, item: WorkItem, doc_id: str, status: ItemStatus) -> None:
        """Record that an item needs no more work (its outputs are already written)."""
        record = ItemDone(item_id=item.item_id, doc_id=doc_id, status=status)
        self.store.write_bytes(f"{ITEMS_DONE_DIR}/{item.item_id}.json", record.dump())

    def item_done(self, item_id: str) -> ItemDone | None:
        """The completion record of an item, or ``None``."""
        blob = self.store.read_bytes(f"{ITEMS_DONE_DIR}/{item_id}.json")
        return ItemDone.load(blob) if blob else None

    def done_item_ids(self) -> set[str]:
        """Ids of every finished item (one listing, for planning a pass over the items)."""
        return {k.rsplit("/", 1)[-1].removesuffix(".json") for k in self.store.list(ITEMS_DONE_DIR)}

    def clear_documents(self, doc_ids: set[str]) -> int:
        """Forget the completion of every item (ranges included) of these documents."""
        cleared = 0
        for item_id in self.done_item_ids():
            record = self.item_done(item_id)
            if record and record.doc_id in doc_ids:
                self.store.delete(f"{ITEMS_DONE_DIR}/{item_id}.json")
                cleared += 1
        return cleared

    def clear_item(self, item_id: str) -> None:
        """Forget an item's completion (``ocrflow retry``), including its ranges."""
        self.store.delete(f"{ITEMS_DONE_DIR}/{item_id}.json")
        for child in self.ranges(item_id):
            self.store.delete(f"{ITEMS_DONE_DIR}/{child.item_id}.json")
