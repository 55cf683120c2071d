"""A job's progress, read from its workspace (the truth every worker writes to), and the
marker that ends a job the workers gave up on (its engine never opened, it went past its
page limit): ``ROOT/jobs/<id>/failed.json`` with a reason and a message."""

from __future__ import annotations

import json
import os
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ocrflow.storage.open import open_store
from ocrflow.types import DocStatus
from ocrflow.workspace.leases import LeaseManager
from ocrflow.workspace.state import Workspace
from ocrflow.workspace.workitems import Manifest

from .layout import JobDir


@dataclass
class JobProgress:
    """Documents by state, pages done of total, failures, and whether every item is done."""

    documents: dict[str, int] = field(default_factory=dict)
    pages_done: int = 0
    pages_total: int = 0
    failures: list[dict[str, Any]] = field(default_factory=list)
    complete: bool = False
    active: bool = False
    #: Why the workers gave the job up (``failed.json``), or ``None``.
    stopped: JobFailure | None = None

    @property
    def all_failed(self) -> bool:
        """Every document failed (a job of nothing but bad files)."""
        total = sum(self.documents.values())
        return total > 0 and self.documents.get("failed", 0) == total

    @property
    def failed(self) -> bool:
        """The job ends ``failed``: every document failed, or the workers gave it up."""
        return self.all_failed or self.stopped is not None


@dataclass(frozen=True)
class JobFailure:
    """Why a job was given up: a reason code (``engine_error``, ``page_limit``) and a
    message for the client (no server paths or addresses)."""

    reason: str
    message: str


FAILED_MARKER = "failed.json"


def fail_job(job: JobDir, reason: str, message: str) -> None:
    """Give the job up: workers stop and skip it, its documents not finished fail with
    ``reason``. The first failure recorded stays (a second would only repeat it)."""
    path = job.path / FAILED_MARKER
    if path.exists():
        return
    tmp = path.with_name(f".{FAILED_MARKER}.{uuid.uuid4().hex[:8]}.tmp")
    tmp.write_text(json.dumps({"reason": reason, "message": message}), encoding="utf-8")
    os.replace(tmp, path)


def job_failure(job: JobDir) -> JobFailure | None:
    """The job's failure marker, or ``None``."""
    try:
        data = json.loads((job.path / FAILED_MARKER).read_bytes())
        return JobFailure(str(data["reason"]), str(data["message"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def pending_items(job: JobDir) -> int:
    """Work items of the job not done yet (ranges and joins of split documents included)."""
    return Manifest(open_store(str(job.out))).unfinished()


def read_progress(job: JobDir) -> JobProgress:
    """The job's progress now."""
    workspace = Workspace(open_store(str(job.out)))
    manifest = Manifest(workspace.store)
    records = workspace.done_records()
    progress = JobProgress()
    documents: Counter[str] = Counter(str(r.status) for r in records)
    items = manifest.items()
    waiting = len(items) - len(records)
    leases = LeaseManager(workspace.store, "status").active()
    progress.active = bool(leases)
    progress.stopped = job_failure(job)
    if waiting > 0:
        documents[_waiting_state(progress)] += waiting
    progress.documents = dict(documents)
    counts = job.page_counts()
    finished = {r.source: len(r.pages) for r in records}
    progress.pages_done = sum(finished.values()) + _checkpointed(workspace, records)
    progress.pages_total = sum(max(counts.get(s, 0), n) for s, n in finished.items()) + sum(
        n for s, n in counts.items() if s not in finished
    )
    progress.failures = [
        {"source": _name(r.source, job), "status": str(r.status), "reason": r.reason,
         "message": r.message}
        for r in records
        if r.status is not DocStatus.OK
    ]  # fmt: skip
    if progress.stopped is not None:
        progress.failures += _given_up(items, records, progress.stopped, job)
        progress.complete = True
        return progress
    progress.complete = bool(items) and pending_items(job) == 0 and waiting <= 0
    return progress


def _waiting_state(progress: JobProgress) -> str:
    if progress.stopped is not None:
        return "failed"
    return "running" if progress.active else "queued"


def _given_up(
    items: list[Any], records: list[Any], failure: JobFailure, job: JobDir
) -> list[dict[str, Any]]:
    """A failure entry for each document the workers did not finish."""
    finished = {r.rel for r in records} | {r.source for r in records}
    return [
        {"source": _name(i.uri, job), "status": "failed", "reason": failure.reason,
         "message": failure.message}
        for i in items
        if i.rel not in finished and i.uri not in finished
    ]  # fmt: skip


def _checkpointed(workspace: Workspace, records: list[Any]) -> int:
    """Pages held in checkpoints of documents that are not finished yet."""
    finished = {r.doc_id for r in records}
    pages: dict[str, set[int]] = {}
    for key in workspace.store.list(".ocrflow/pages"):
        doc_id = key.split("/")[-2]
        if doc_id in finished or not key.endswith(".json"):
            continue
        blob = workspace.store.read_bytes(key)
        try:
            numbers = {int(p["page"]) for p in json.loads(blob or b"[]")}
        except (ValueError, KeyError, TypeError):
            continue  # being replaced: counted at the next look
        pages.setdefault(doc_id, set()).update(numbers)
    return sum(len(p) for p in pages.values())


def _name(source: str, job: JobDir) -> str:
    """An uploaded file's name (the server's folders are nobody's business), or a URI."""
    folder = str(job.inputs)
    if source.startswith(folder + "#"):  # a row of an uploaded dataset folder
        return source[len(folder) + 1 :]
    return source.removeprefix(folder + "/")
