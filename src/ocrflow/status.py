"""What ``ocrflow status`` reports: documents and pages by state, failures, speed."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from ocrflow.leases import LeaseManager
from ocrflow.workitems import Manifest
from ocrflow.workspace import Workspace

#: A worker whose run record was refreshed this recently counts as alive.
_ALIVE_S = 30.0


def collect_status(workspace: Workspace, *, gpu_hour_cost: float | None = None) -> dict[str, Any]:
    """One JSON-ready object: ``documents``, ``pages``, ``failures``, ``runs``, ``last_run``."""
    records = workspace.done_records()
    runs = workspace.run_records()
    documents: Counter[str] = Counter(r["status"] for r in records)
    manifest = Manifest(workspace.store)
    done_items = manifest.done_item_ids()
    pending = [i for i in manifest.items() if i.item_id not in done_items]
    if pending:
        documents["pending"] = len(pending)
    leases = LeaseManager(workspace.store, "status").active()
    pages: Counter[str] = Counter()
    routes: Counter[str] = Counter()
    tokens_in = tokens_out = 0
    for record in records:
        for page in record.get("pages", []):
            pages[page["status"]] += 1
            routes[page["route"]] += 1
            tokens_in += page.get("tokens_in", 0)
            tokens_out += page.get("tokens_out", 0)
    failures = [
        {
            "source": r["source"],
            "status": r["status"],
            "reason": r.get("reason"),
            "message": r.get("message"),
        }
        for r in records
        if r["status"] != "ok"
    ]
    last = runs[-1] if runs else None
    status: dict[str, Any] = {
        "output": workspace.store.root,
        "documents": dict(documents),
        "pages": dict(pages),
        "routes": dict(routes),
        "tokens": {"in": tokens_in, "out": tokens_out},
        "failures": failures,
        "failures_by_reason": dict(Counter(f["reason"] for f in failures)),
        "runs": len(runs),
        "last_run": last,
        "workers": _workers(runs),
        "active_leases": leases,
    }
    if gpu_hour_cost is not None and last and last.get("pages_per_s"):
        status["cost_per_1000_pages"] = round(gpu_hour_cost / 3600 / last["pages_per_s"] * 1000, 4)
    return status


def _workers(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each worker's latest run: pages done, pages/s, and whether it is still alive."""
    now = time.time()
    latest: dict[str, dict[str, Any]] = {}
    for run in runs:
        latest[run.get("worker", "?")] = run
    return [
        {
            "worker": name,
            "pages": sum(run.get("pages", {}).values()),
            "pages_per_s": run.get("pages_per_s"),
            "alive": not run.get("finished") and now - run.get("heartbeat", 0) < _ALIVE_S,
        }
        for name, run in sorted(latest.items())
    ]
