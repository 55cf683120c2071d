"""What ``ocrflow status`` reports: documents and pages by state, failures, speed."""

from __future__ import annotations

from collections import Counter
from typing import Any

from ocrflow.workspace import Workspace


def collect_status(workspace: Workspace, *, gpu_hour_cost: float | None = None) -> dict[str, Any]:
    """One JSON-ready object: ``documents``, ``pages``, ``failures``, ``runs``, ``last_run``."""
    records = workspace.done_records()
    runs = workspace.run_records()
    documents: Counter[str] = Counter(r["status"] for r in records)
    total = max((r.get("documents_total", 0) for r in runs), default=0)
    if total > len(records):
        documents["pending"] = total - len(records)
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
    }
    if gpu_hour_cost is not None and last and last.get("pages_per_s"):
        status["cost_per_1000_pages"] = round(gpu_hour_cost / 3600 / last["pages_per_s"] * 1000, 4)
    return status
