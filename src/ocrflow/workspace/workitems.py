"""Work items: what a run must do, built once from the inputs and shared by every worker.

An item is a whole document, or — for a very long one — a range of its pages, so a
3,000-page PDF does not sit on one worker. Items are named by the document's place in the
inputs (not its bytes), so a worker can tell an item is done without downloading it; each
records its source's stamp (size, times or ETag) so that a rerun can tell which sources
changed since (see ``input_changes``).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable

from ocrflow.config.access import is_url
from ocrflow.inputs.source import Source, parse_row_uri
from ocrflow.storage.local import Store
from ocrflow.storage.names import local_path
from ocrflow.workspace.records import (
    JOIN_SUFFIX,
    ItemDone,
    ItemStatus,
    WorkItem,
    dump_lines,
    dump_list,
)

__all__ = [
    "ItemDone",
    "Manifest",
    "WorkItem",
    "document_items",
    "item_id_for",
    "join_item",
    "range_items",
    "source_stamp",
]

MANIFEST_DIR = ".ocrflow/manifest"
RANGES_DIR = ".ocrflow/ranges"
ITEMS_DONE_DIR = ".ocrflow/items"
_SHARD_ITEMS = 5000


def item_id_for(uri: str, rel: str, fingerprint: str) -> str:
    """The id of a document item: where the document is and the settings, not its bytes.
    (Sources carry no lone surrogates, ``names.local_uri``; should one slip through, it is
    hashed as it is rather than stopping the run.)"""
    blob = f"{fingerprint}\0{rel}\0{uri}".encode("utf-8", "surrogatepass")
    return hashlib.sha256(blob).hexdigest()[:24]


def source_stamp(source: Source) -> str:
    """What tells cheaply that a source may have changed: a local file's size, modification
    and change times (ns); elsewhere its size and the version its listing gave (an object's
    ETag), if any. Equal stamps: taken as unchanged, without reading a byte."""
    if is_url(source.uri) or parse_row_uri(source.uri) is not None:
        return f"{source.size}:{source.version}"
    try:
        st = os.stat(local_path(source.uri))
    except OSError:
        return f"{source.size}:"
    return f"{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"


def document_items(sources: Iterable[tuple[Source, str]], fingerprint: str) -> list[WorkItem]:
    """One item per (source, unique relative name), stamped as the source is now."""
    return [
        WorkItem(
            item_id=item_id_for(s.uri, rel, fingerprint),
            uri=s.uri,
            rel=rel,
            kind=s.kind,
            size=s.size,
            stamp=source_stamp(s),
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


def join_item(ranges: list[WorkItem]) -> WorkItem:
    """The item that assembles a split document from its ranges' page checkpoints, once
    every range is done. It is an item of its own, leased and marked done like the others,
    so that a worker killed between the last range and the assembly leaves work that the
    others see (not a document that nobody finishes)."""
    parent_id = ranges[0].item_id.split("@", 1)[0]
    return ranges[0].model_copy(update={"item_id": parent_id + JOIN_SUFFIX, "first": 0, "last": 0})


class Manifest:
    """The items of a run, stored as immutable shards under ``.ocrflow/manifest``.

    Adding inputs later writes a new shard holding only the new items; a changed source
    writes a shard with a newer version of its item (``restamp``). Shards are created with
    create-if-absent, so concurrent writers never clobber each other.
    """

    def __init__(self, store: Store) -> None:
        self.store = store

    def items(self) -> list[WorkItem]:
        """Every document item of every shard, each in its newest version, in a stable order."""
        seen: dict[str, WorkItem] = {}
        for key in self.store.list(MANIFEST_DIR):
            for line in (self.store.read_bytes(key) or b"").splitlines():
                if line.strip():
                    item = WorkItem.load(line)
                    held = seen.get(item.item_id)
                    if held is None or (item.version, item.stamp) > (held.version, held.stamp):
                        seen[item.item_id] = item
        return list(seen.values())

    def extend(self, items: list[WorkItem]) -> int:
        """Record the items not recorded yet; returns how many were new."""
        known = {i.item_id for i in self.items()}
        new = [i for i in items if i.item_id not in known]
        self._write(new)
        return len(new)

    def restamp(self, items: list[WorkItem]) -> None:
        """Record newer versions of known items (their sources changed since)."""
        self._write(items)

    def _write(self, items: list[WorkItem]) -> None:
        for start in range(0, len(items), _SHARD_ITEMS):
            shard = items[start : start + _SHARD_ITEMS]
            names = "".join(f"{i.item_id}.{i.version}.{i.stamp}\n" for i in shard)
            digest = hashlib.sha256(names.encode()).hexdigest()[:16]
            self.store.create_exclusive(f"{MANIFEST_DIR}/{digest}.jsonl", dump_lines(shard))

    # -- ranges of long documents -------------------------------------------------------
    def split(self, parent: WorkItem, ranges: list[WorkItem]) -> list[WorkItem]:
        """Record how a long document is split; the first recorded split wins."""
        self.store.create_exclusive(f"{RANGES_DIR}/{parent.item_id}.json", dump_list(ranges))
        return self.ranges(parent.item_id) or ranges

    def ranges(self, parent_id: str) -> list[WorkItem]:
        """The range items a document was split into, or ``[]``."""
        blob = self.store.read_bytes(f"{RANGES_DIR}/{parent_id}.json")
        return [WorkItem.model_validate(r) for r in json.loads(blob)] if blob else []

    def splits(self) -> list[list[WorkItem]]:
        """The range items of each split document."""
        found: list[list[WorkItem]] = []
        for key in self.store.list(RANGES_DIR):
            blob = self.store.read_bytes(key) or b"[]"
            ranges = [WorkItem.model_validate(r) for r in json.loads(blob)]
            if ranges:
                found.append(ranges)
        return found

    def all_items(self) -> list[WorkItem]:
        """Every item of the run: documents, ranges, and the join item of each split one
        (the run is finished when all of them are done)."""
        found = self.items()
        for ranges in self.splits():
            found.extend((*ranges, join_item(ranges)))
        return found

    def open_items(self) -> list[WorkItem]:
        """The items not done that a worker can take now: a split document's join item
        only once its ranges are all done."""
        done = self.done_item_ids()
        found = [i for i in self.items() if i.item_id not in done]
        for ranges in self.splits():
            left = [r for r in ranges if r.item_id not in done]
            join = join_item(ranges)
            found.extend(left or ([join] if join.item_id not in done else []))
        return found

    def unfinished_documents(self) -> int:
        """How many documents are not finished: items not done, and split documents whose
        join is not done."""
        done = self.done_item_ids()
        joins = (join_item(ranges).item_id for ranges in self.splits())
        return sum(1 for i in self.items() if i.item_id not in done) + sum(
            1 for j in joins if j not in done
        )

    def unfinished(self) -> int:
        """How many items are not done yet."""
        done = self.done_item_ids()
        return sum(1 for i in self.all_items() if i.item_id not in done)

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

    def reopen_ranges(self, join: WorkItem, pages: list[int]) -> None:
        """Forget the completion of the ranges of ``join``'s document holding ``pages``."""
        for child in self.ranges(join.item_id.removesuffix(JOIN_SUFFIX)):
            if any(child.first <= p <= child.last for p in pages):
                self.store.delete(f"{ITEMS_DONE_DIR}/{child.item_id}.json")

    def clear_item(self, item_id: str) -> None:
        """Forget an item's completion (``ocrflow retry``), including its ranges' and join's."""
        self.store.delete(f"{ITEMS_DONE_DIR}/{item_id}.json")
        self._clear_split_items(item_id)

    def _clear_split_items(self, item_id: str) -> None:
        ranges = self.ranges(item_id)
        for child in (*ranges, join_item(ranges)) if ranges else ():
            self.store.delete(f"{ITEMS_DONE_DIR}/{child.item_id}.json")

    def forget_split(self, item_id: str) -> None:
        """Forget how a document was split and its ranges' completion (its source changed:
        the new one is split afresh). The item's own completion goes last, so a kill
        halfway leaves it done and the next planning forgets it again."""
        self._clear_split_items(item_id)
        self.store.delete(f"{RANGES_DIR}/{item_id}.json")
        self.store.delete(f"{ITEMS_DONE_DIR}/{item_id}.json")
