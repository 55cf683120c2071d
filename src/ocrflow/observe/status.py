"""What ``ocrflow status`` reports: documents and pages by state, failures, speed."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from ocrflow.inputs.skips import load_skipped
from ocrflow.observe.confidence_spread import ConfidenceSpread
from ocrflow.types import DocStatus
from ocrflow.workspace.leases import LeaseManager
from ocrflow.workspace.records import DoneRecord, RunRecord
from ocrflow.workspace.state import Workspace
from ocrflow.workspace.workitems import Manifest

#: A worker whose run record was refreshed this recently counts as alive.
_ALIVE_S = 30.0


def out_summary(workspace: Workspace) -> dict[str, Any]:
    """The whole OUT's documents by status (``pending``: items not finished) and pages by
    status, whichever run or worker did them: what a run reports of the OUT at its end."""
    records = workspace.done_records()
    pages: Counter[str] = Counter(p.status for r in records for p in r.pages)
    return {"documents": dict(_documents(workspace, records)), "pages": dict(pages)}


def _documents(workspace: Workspace, records: list[DoneRecord]) -> Counter[str]:
    documents: Counter[str] = Counter(str(r.status) for r in records)
    pending = Manifest(workspace.store).unfinished_documents()
    if pending:
        documents["pending"] = pending
    return documents


def collect_status(workspace: Workspace, *, gpu_hour_cost: float | None = None) -> dict[str, Any]:
    """One JSON-ready object: ``documents``, ``pages``, ``routes``, ``confidence`` (pages by
    confidence bucket, ``observe.confidence_spread``), ``failures``, ``runs``, ``last_run``,
    ``files_skipped`` (what the latest planning's walks left out, by reason)."""
    records = workspace.done_records()
    runs = workspace.run_records()
    documents = _documents(workspace, records)
    leases = LeaseManager(workspace.store, "status").active()
    pages: Counter[str] = Counter()
    routes: Counter[str] = Counter()
    tokens_in = tokens_out = 0
    spread = ConfidenceSpread()
    for record in records:
        spread.add(record)
        for page in record.pages:
            pages[page.status] += 1
            routes[page.route] += 1
            tokens_in += page.tokens_in
            tokens_out += page.tokens_out
    failures = [
        {"source": r.source, "status": str(r.status), "reason": r.reason, "message": r.message}
        for r in records
        if r.status is not DocStatus.OK
    ]
    last = runs[-1].model_dump() if runs else None
    status: dict[str, Any] = {
        "output": workspace.store.root,
        "documents": dict(documents),
        "pages": dict(pages),
        "routes": dict(routes),
        "tokens": {"in": tokens_in, "out": tokens_out},
        # Pages by confidence (``document.confidence``): counts, shares, the worst few.
        "confidence": spread.summary(),
        "failures": failures,
        "failures_by_reason": dict(Counter(f["reason"] for f in failures)),
        "runs": len(runs),
        "last_run": last,
        "workers": _workers(runs),
        "active_leases": leases,
        # Not documents: files the latest planning's walks left out, by reason.
        "files_skipped": dict(load_skipped(workspace.store).counts),
    }
    if gpu_hour_cost is not None and last and last.get("pages_per_s"):
        status["cost_per_1000_pages"] = round(gpu_hour_cost / 3600 / last["pages_per_s"] * 1000, 4)
    return status


def _workers(runs: list[RunRecord]) -> list[dict[str, Any]]:
    """Each worker's latest run: pages done, pages/s, and whether it is still alive."""
    now = time.time()
    latest = {run.worker: run for run in runs}
    return [
        {
            "worker": name,
            "pages": sum(run.pages.values()),
            "pages_per_s": run.pages_per_s,
            "alive": not run.finished and now - run.heartbeat < _ALIVE_S,
        }
        for name, run in sorted(latest.items())
    ]
