"""Page confidences read from done markers, and how an OUT's pages spread across them.

A done marker carries each page's route, status, attempts, attributes and blocks, which is
all ``document.confidence.page_score`` needs: no text is read, so ``ocrflow status`` and
``ocrflow review --only low-confidence`` score a whole OUT from its markers alone.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ocrflow.document.confidence import BUCKETS, bucket, page_score
from ocrflow.document.rows import blocks_from_rows
from ocrflow.workspace.records import DoneRecord, PageSummary


@dataclass(frozen=True, slots=True)
class ScoredPage:
    """One page of a finished document and its confidence."""

    doc_id: str
    source: str
    page: int
    confidence: float | None


def summary_confidence(summary: PageSummary) -> float | None:
    """The confidence of a page as its done marker records it (``page_score``)."""
    return page_score(
        summary.route,
        summary.status,
        summary.attributes,
        attempts=summary.attempts,
        blocks=_block_scores(summary.blocks),
    )


def _block_scores(rows: Sequence[Any]) -> Iterator[tuple[float | None, int]]:
    # A generator: the rows are decoded only when the page has no score of its own.
    for block in blocks_from_rows(rows):
        yield block.confidence, len(block.text)


def scored_pages(record: DoneRecord) -> list[ScoredPage]:
    """The confidence of each page of ``record``, in page order."""
    return [
        ScoredPage(record.doc_id, record.rel or record.source, p.page, summary_confidence(p))
        for p in sorted(record.pages, key=lambda p: p.page)
    ]


def lowest_confidence(record: DoneRecord) -> float | None:
    """The document's worst page confidence (``None`` when no page has one)."""
    known = [s.confidence for s in scored_pages(record) if s.confidence is not None]
    return min(known) if known else None


class ConfidenceSpread:
    """Counts pages per confidence bucket (``document.confidence.BUCKETS``, plus
    ``unknown``) and keeps the ``keep`` worst pages, one record at a time."""

    def __init__(self, keep: int = 5) -> None:
        self.counts: dict[str, int] = {name: 0 for name, _ in BUCKETS} | {"unknown": 0}
        self._keep = keep
        self._worst: list[tuple[float, int, ScoredPage]] = []
        self._seen = 0

    def add(self, record: DoneRecord) -> None:
        """Count the pages of one finished document."""
        for scored in scored_pages(record):
            self._seen += 1
            value = scored.confidence
            if value is None:
                self.counts["unknown"] += 1
                continue
            self.counts[bucket(value)] += 1
            # A max-heap of the worst pages by negated confidence, bounded by ``keep``.
            entry = (-value, -self._seen, scored)
            if len(self._worst) < self._keep:
                heapq.heappush(self._worst, entry)
            elif entry > self._worst[0]:
                heapq.heapreplace(self._worst, entry)

    def summary(self) -> dict[str, Any]:
        """``{"pages": {bucket: n}, "shares": {bucket: share}, "lowest": [...]}``."""
        total = sum(self.counts.values())
        shares = {k: round(n / total, 4) if total else 0.0 for k, n in self.counts.items()}
        lowest = [
            {"doc_id": s.doc_id, "source": s.source, "page": s.page, "confidence": s.confidence}
            for _, _, s in sorted(self._worst, reverse=True)
        ]
        return {"pages": dict(self.counts), "shares": shares, "lowest": lowest}


def confidence_spread(records: Iterable[DoneRecord], keep: int = 5) -> dict[str, Any]:
    """The spread of the pages of ``records`` (``ConfidenceSpread.summary``)."""
    spread = ConfidenceSpread(keep)
    for record in records:
        spread.add(record)
    return spread.summary()


def spread_rows(report: dict[str, Any]) -> list[tuple[str, str]]:
    """``(what, count)`` rows of a status report's ``confidence`` for a table: each
    bucket with its share, then the worst pages."""
    spread = report.get("confidence") or {}
    rows = [
        (f"page confidence {name}", f"{n} ({spread['shares'][name]:.1%})")
        for name, n in spread.get("pages", {}).items()
    ]
    rows += [
        (f"lowest: {w['source']} p{w['page']}", f"{w['confidence']:.3f}")
        for w in spread.get("lowest", ())
    ]
    return rows
