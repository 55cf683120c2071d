"""Counting what a run did, for its summary, its record in the workspace and the exit code."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ocrflow.inputs.skips import Skipped
from ocrflow.inputs.source import Source
from ocrflow.types import DocStatus, DocumentResult, PageResult
from ocrflow.workspace.records import DoneRecord, PageSummary


def new_run_id() -> str:
    """A run's id: when it started, and a random part (``20250101T120000-1a2b3c``)."""
    return f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:6]}"


@dataclass
class RunStats:
    """Mutable tallies owned by one run (not shared across runs or modules)."""

    #: The id its run record in the workspace has (``ocrflow status`` shows it).
    run_id: str = field(default_factory=new_run_id)
    #: The worker (lease owner) that did the run.
    worker: str = "local"
    started: float = field(default_factory=time.time)
    finished: float | None = None
    documents: Counter[str] = field(default_factory=Counter)
    pages: Counter[str] = field(default_factory=Counter)
    routes: Counter[str] = field(default_factory=Counter)
    tokens_in: int = 0
    tokens_out: int = 0
    skipped_documents: int = 0
    failures: list[dict[str, Any]] = field(default_factory=list)
    #: Items this worker dropped because another worker took them over (lease expired).
    leases_lost: int = 0
    #: Workers (Ray actors) that died during the run; their items went to others.
    workers_lost: int = 0
    #: The whole OUT's state when the run ended (``status.out_summary``): documents other
    #: runs or workers finished meanwhile are in it, not in this run's tallies.
    out: dict[str, Any] | None = None
    #: Files the inputs' walks left out, by reason (not documents: no status of their own).
    files_skipped: Skipped = field(default_factory=Skipped)

    def document_started(self, source: Source, pages: int) -> None:
        pass

    def pages_finished(self, results: list[PageResult]) -> None:
        for page in results:
            self.pages[str(page.status)] += 1
            self.routes[str(page.route)] += 1
            self.tokens_in += page.tokens_in
            self.tokens_out += page.tokens_out

    def document_finished(self, source: Source, result: DocumentResult, skipped: bool) -> None:
        self.documents[str(result.status)] += 1
        self.skipped_documents += int(skipped)
        if result.status is not DocStatus.OK:
            self.failures.append(
                {
                    "source": source.uri,
                    "status": str(result.status),
                    "reason": result.reason,
                    "message": result.message,
                }
            )

    def add_done_record(self, record: DoneRecord, *, skipped: bool) -> None:
        """Count a document from its done marker (what ``Workspace.mark_done`` wrote): the
        durable tally, for executors whose workers may die before reporting."""
        status = str(record.status)
        self.documents[status] += 1
        self.skipped_documents += int(skipped)
        if not skipped:
            self._add_page_summaries(record.pages)
        if record.status is not DocStatus.OK:
            self.failures.append(
                {
                    "source": record.source,
                    "status": status,
                    "reason": record.reason,
                    "message": record.message,
                }
            )

    def _add_page_summaries(self, pages: Iterable[PageSummary]) -> None:
        for page in pages:
            self.pages[page.status] += 1
            self.routes[page.route] += 1
            self.tokens_in += page.tokens_in
            self.tokens_out += page.tokens_out

    def worker_lost(self, worker: str, message: str) -> None:
        """Record a worker that died mid-run (listed with the failures)."""
        self.workers_lost += 1
        self.failures.append(
            {"source": worker, "status": "worker_lost", "reason": "worker_died", "message": message}
        )

    @property
    def elapsed_s(self) -> float:
        return (self.finished or time.time()) - self.started

    @property
    def pages_done(self) -> int:
        return sum(self.pages.values())

    def exit_code(self) -> int:
        """0 when every document converted fully, 1 otherwise (some failed, are partial, or
        were left pending because every worker died)."""
        bad = sum(self.documents[s] for s in (DocStatus.FAILED, DocStatus.PARTIAL, "pending"))
        return 1 if bad else 0

    def record(self, run_id: str | None = None, worker: str | None = None) -> dict[str, Any]:
        """The run's figures as saved in the workspace (under its own id and worker unless
        others are given)."""
        elapsed = max(self.elapsed_s, 1e-9)
        return {
            "run_id": run_id or self.run_id,
            "worker": worker or self.worker,
            "started": self.started,
            "finished": self.finished,
            "elapsed_s": round(elapsed, 3),
            "documents": dict(self.documents),
            "documents_skipped": self.skipped_documents,
            "pages": dict(self.pages),
            "routes": dict(self.routes),
            "pages_per_s": round(self.pages_done / elapsed, 3),
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "tokens_out_per_s": round(self.tokens_out / elapsed, 3),
            "leases_lost": self.leases_lost,
            "workers_lost": self.workers_lost,
            "files_skipped": dict(self.files_skipped.counts),
        }
