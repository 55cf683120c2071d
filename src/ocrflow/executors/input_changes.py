"""Inputs that changed since an earlier run: found when a run is planned, and forgotten, so
that the run converts them again and their new outputs replace the old ones.

A work item is named by its document's place, a document by its bytes (``document_id``
hashes them): a file changed at the same path keeps its item but gets a new document id.
Planning compares each source's stamp (``workitems.source_stamp``: a local file's size and
times, an object's size and ETag) with the stamp its item was planned with. Only when they
differ does it look closer:

* a local file is hashed; when its document id is the one its item finished with (the file
  was touched or copied back unchanged), only the new stamp is recorded;
* an object in a store is taken as changed when its ETag differs (S3 ETags follow the
  bytes; reading every object again to be sure would cost a download each);
* a changed document is forgotten under its item's lease (no worker is converting it):
  its done marker first, then its outputs (JSONL record, Markdown, figure crops, page
  checkpoints), then its item's completion and its split into ranges. Its Parquet row
  stays in its shard until the run's end, when ``finalize_shards`` drops rows without a
  done marker. Last, the item is recorded with the new stamp, size and kind.

A kill at any point leaves the old stamp recorded, so the next planning does it again.
Same size and times but other bytes (a file rewritten and its times set back) are not seen:
``ocrflow retry`` cannot help there either; delete the output's done marker by hand.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterable

from ocrflow.errors import OcrflowError
from ocrflow.inputs.source import parse_row_uri
from ocrflow.pipeline.documents import content_hash, document_id
from ocrflow.sinks.base import FIGURES_DIR
from ocrflow.sinks.jsonl import results_key
from ocrflow.sinks.markdown import markdown_key
from ocrflow.workspace.leases import LeaseManager, new_owner
from ocrflow.workspace.records import WorkItem
from ocrflow.workspace.state import Workspace
from ocrflow.workspace.workitems import Manifest

log = logging.getLogger("ocrflow.plan")


def refresh_changed(
    workspace: Workspace,
    planned: Iterable[WorkItem],
    fingerprint: str,
    recorded: Iterable[WorkItem] | None = None,
) -> list[WorkItem]:
    """Forget the finished documents whose sources changed since they were planned, and
    record every planned item whose stamp differs; returns the items to convert again.
    ``recorded``: the manifest's items, when the caller has read them already."""
    manifest = Manifest(workspace.store)
    earlier = manifest.items() if recorded is None else recorded
    known = {item.item_id: item for item in earlier}
    restamped, changed = [], []
    for item in planned:
        before = known.get(item.item_id)
        if before is None or before.stamp == item.stamp:
            continue
        outcome = _refresh(workspace, manifest, before, item, fingerprint)
        if outcome is None:
            continue  # someone holds the item: look again at the next planning
        if outcome:
            changed.append(item)
        restamped.append(item.model_copy(update={"version": before.version + 1}))
    manifest.restamp(restamped)
    for item in changed:
        log.info("%s changed since it was converted: converting it again", item.rel)
    return changed


def _refresh(
    workspace: Workspace, manifest: Manifest, before: WorkItem, now: WorkItem, fingerprint: str
) -> bool | None:
    """Whether the item's finished document is stale (and was forgotten); ``None`` when
    another worker holds its lease."""
    old_doc = _finished_doc(manifest, before.item_id)
    if old_doc is None or not _stale(before, now, old_doc, fingerprint):
        return False
    leases = LeaseManager(workspace.store, new_owner())
    lease = leases.claim(now.item_id)
    if lease is None:
        return None
    try:
        if _finished_doc(manifest, now.item_id) != old_doc:
            return False  # converted again meanwhile, by a run planned before us
        forget_document(workspace, old_doc, before.rel)
        manifest.forget_split(now.item_id)
        return True
    finally:
        leases.release(lease)


def _finished_doc(manifest: Manifest, item_id: str) -> str | None:
    """The document id the item finished (or was split) with, if it got that far."""
    done = manifest.item_done(item_id)
    if done is not None:
        return done.doc_id
    ranges = manifest.ranges(item_id)
    return ranges[0].doc_id if ranges else None


def _stale(before: WorkItem, now: WorkItem, old_doc: str, fingerprint: str) -> bool:
    """Whether the source's bytes differ from those of ``old_doc``."""
    if "://" in now.uri or parse_row_uri(now.uri) is not None:
        # No bytes to hash without a download: a stamp from before stamps existed only
        # counts as a change when the size differs.
        return before.stamp != "" or before.size != now.size
    try:
        if not stat.S_ISREG(os.stat(now.uri).st_mode):
            return True  # never read a device or a FIFO here: the run refuses it again
        digest = content_hash(now.uri)
    except (OSError, OcrflowError):
        return True  # unreadable now: converting it again reports why
    return document_id(digest, fingerprint, now.rel) != old_doc


def forget_document(workspace: Workspace, doc_id: str, rel: str) -> None:
    """Remove a finished document: its done marker first (it is no longer finished), then
    its outputs and page checkpoints. Its Parquet row goes when the shards are finalized."""
    store = workspace.store
    workspace.clear_done(doc_id)
    store.delete(results_key(doc_id))
    store.delete(markdown_key(rel))
    for key in store.list(f"{FIGURES_DIR}/{doc_id}"):
        store.delete(key)
    workspace.clear_pages(doc_id)
