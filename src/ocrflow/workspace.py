"""Durable run state inside OUT/.ocrflow: done markers, page checkpoints, run records.

Ordering is what makes resume safe: a document's outputs are written (atomically) before its
done marker, and a page checkpoint is written before the pages it holds are counted as done.
A run killed at any instant leaves either finished documents, whose outputs are complete, or
unfinished ones, which the next run redoes from their last checkpoint.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from typing import Any

from ocrflow.config import RunConfig
from ocrflow.errors import WorkspaceError
from ocrflow.storage import Store
from ocrflow.types import DocumentResult, PageResult, PageStatus, Route

WORKSPACE_DIR = ".ocrflow"


def page_to_dict(page: PageResult) -> dict[str, Any]:
    """A JSON-ready form of a page result."""
    return asdict(page)


def page_from_dict(data: dict[str, Any]) -> PageResult:
    """The inverse of ``page_to_dict``."""
    fields = dict(data)
    fields["route"] = Route(fields["route"])
    fields["status"] = PageStatus(fields["status"])
    return PageResult(**fields)


class Workspace:
    """The state of one output location, shared by every run and worker that writes to it."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def _key(self, *parts: str) -> str:
        return "/".join((WORKSPACE_DIR, *parts))

    # -- configuration -------------------------------------------------------------------
    def bind(self, config: RunConfig) -> str:
        """Record the run's configuration, or check it matches the recorded one.

        Returns the fingerprint. A different fingerprint is refused: mixing result sets made
        with different settings in one OUT would make the outputs lie.
        """
        fingerprint = config.fingerprint()
        record = {
            "fingerprint": fingerprint,
            "settings": config.fingerprint_fields(),
            "run": config.public_dump(),
        }
        blob = json.dumps(record, indent=2, sort_keys=True).encode()
        if self.store.create_exclusive(self._key("config.json"), blob):
            return fingerprint
        existing = self.recorded_config()
        if existing.get("fingerprint") != fingerprint:
            raise WorkspaceError(
                _mismatch_message(existing.get("settings", {}), record["settings"])
            )
        return fingerprint

    def recorded_run_config(self) -> RunConfig:
        """The full configuration of the first run (secrets excluded), to resume or retry it."""
        record = self.recorded_config()
        if "run" not in record:
            raise WorkspaceError(f"{self.store.root} holds no ocrflow run")
        return RunConfig.model_validate(record["run"])

    def requeue(self, statuses: set[str], reasons: set[str] | None = None) -> set[str]:
        """Forget finished documents with these statuses (and reasons); return their ids."""
        requeued = set()
        for record in self.done_records():
            if record["status"] in statuses and (not reasons or record.get("reason") in reasons):
                self.clear_done(record["doc_id"])
                requeued.add(record["doc_id"])
        return requeued

    def recorded_config(self) -> dict[str, Any]:
        """The configuration recorded by the first run, or ``{}``."""
        blob = self.store.read_bytes(self._key("config.json"))
        return json.loads(blob) if blob else {}

    # -- documents -----------------------------------------------------------------------
    def done_record(self, doc_id: str) -> dict[str, Any] | None:
        """The done marker of a finished document, or ``None``."""
        blob = self.store.read_bytes(self._key("done", f"{doc_id}.json"))
        return json.loads(blob) if blob else None

    def mark_done(self, result: DocumentResult, extra: dict[str, Any] | None = None) -> None:
        """Write the done marker. Call only after the document's outputs are written."""
        record = {
            "doc_id": result.doc_id,
            "source": result.source,
            "status": str(result.status),
            "reason": result.reason,
            "message": result.message,
            "page_count": result.page_count,
            "pages": [_page_summary(p) for p in result.pages],
            "finished": time.time(),
            **(extra or {}),
        }
        self.store.write_bytes(self._key("done", f"{result.doc_id}.json"), _dumps(record))

    def clear_done(self, doc_id: str) -> None:
        """Forget that a document finished, so the next run does it again."""
        self.store.delete(self._key("done", f"{doc_id}.json"))

    def done_records(self) -> list[dict[str, Any]]:
        """Every done marker."""
        records = []
        for key in self.store.list(self._key("done")):
            blob = self.store.read_bytes(key)
            if blob:
                records.append(json.loads(blob))
        return records

    # -- page checkpoints ----------------------------------------------------------------
    def save_pages(self, doc_id: str, pages: list[PageResult]) -> None:
        """Checkpoint finished pages of an unfinished document."""
        if not pages:
            return
        first, last = min(p.page for p in pages), max(p.page for p in pages)
        blob = _dumps([page_to_dict(p) for p in pages])
        self.store.write_bytes(self._key("pages", doc_id, f"{first:06d}-{last:06d}.json"), blob)

    def load_pages(self, doc_id: str) -> dict[int, PageResult]:
        """Pages checkpointed by earlier, interrupted runs."""
        pages: dict[int, PageResult] = {}
        for key in self.store.list(self._key("pages", doc_id)):
            blob = self.store.read_bytes(key)
            for data in json.loads(blob) if blob else []:
                page = page_from_dict(data)
                pages[page.page] = page
        return pages

    def clear_pages(self, doc_id: str) -> None:
        """Drop a finished document's checkpoints."""
        for key in self.store.list(self._key("pages", doc_id)):
            self.store.delete(key)

    def log_dir(self) -> str | None:
        """A local folder for server logs, when the workspace is on local disk."""
        root = getattr(self.store, "root", "")
        if "://" in root:
            return None
        return f"{root}/{WORKSPACE_DIR}/logs"

    # -- runs ----------------------------------------------------------------------------
    def record_run(self, run_id: str, stats: dict[str, Any]) -> None:
        """Save one run's (or worker's) figures for ``ocrflow status``."""
        self.store.write_bytes(self._key("runs", f"{run_id}.json"), _dumps(stats))

    def run_records(self) -> list[dict[str, Any]]:
        """Every recorded run, oldest first."""
        records = []
        for key in self.store.list(self._key("runs")):
            blob = self.store.read_bytes(key)
            if blob:
                records.append(json.loads(blob))
        return sorted(records, key=lambda r: r.get("started", 0))


def _page_summary(page: PageResult) -> dict[str, Any]:
    summary = page_to_dict(page)
    summary.pop("text")
    return summary


def _dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def _mismatch_message(old: dict[str, Any], new: dict[str, Any]) -> str:
    changed = ", ".join(
        f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in sorted(new) if old.get(k) != new.get(k)
    )
    return (
        f"this output directory holds results made with other settings ({changed}); "
        "use another -o, or the same settings to resume"
    )
