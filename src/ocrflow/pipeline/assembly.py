"""A document's result from its pages: their order, running heads, and its status."""

from __future__ import annotations

from collections import Counter

from ocrflow.document.running_heads import label_running_heads
from ocrflow.types import DocStatus, DocumentResult, PageResult, PageStatus, Reason, Route


def assemble_document(
    doc_id: str,
    source: str,
    pages: list[PageResult],
    page_count: int,
    *,
    max_fallback_rate: float = 0.0,
) -> DocumentResult:
    """A document's status from its pages.

    ok: every page converted by its intended route; partial: some pages failed, or more than
    ``max_fallback_rate`` of them fell back (kept, marked, retried by ``ocrflow retry``);
    failed: no page converted.
    """
    # Running heads are only told apart from body text across pages (running_heads.py):
    # here, once every route has given its pages and before any sink writes them.
    ordered = label_running_heads(sorted(pages, key=lambda p: p.page))
    failed = [p for p in ordered if p.status is PageStatus.FAILED]
    fallbacks = [p for p in ordered if p.route is Route.FALLBACK and p.status is PageStatus.OK]
    if failed and len(failed) == len(ordered):
        reason, _ = Counter(p.reason or Reason.PAGE_ERRORS for p in failed).most_common(1)[0]
        message = failed[0].error or reason
        return DocumentResult(
            doc_id, source, DocStatus.FAILED, ordered, page_count, reason, message
        )
    if failed:
        reasons = Counter(p.reason or Reason.PAGE_ERRORS for p in failed)
        message = f"{len(failed)} of {len(ordered)} pages failed: " + ", ".join(
            f"{r} x{n}" for r, n in reasons.most_common()
        )
        return DocumentResult(
            doc_id, source, DocStatus.PARTIAL, ordered, page_count, Reason.PAGE_ERRORS, message
        )
    if ordered and len(fallbacks) / len(ordered) > max_fallback_rate:
        message = f"{len(fallbacks)} of {len(ordered)} pages fell back: {fallbacks[0].error}"
        return DocumentResult(
            doc_id, source, DocStatus.PARTIAL, ordered, page_count, Reason.FALLBACK_PAGES, message
        )
    return DocumentResult(doc_id, source, DocStatus.OK, ordered, page_count)
