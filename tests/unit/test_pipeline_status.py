from __future__ import annotations

from ocrflow.pipeline.assembly import assemble_document
from ocrflow.pipeline.documents import document_id
from ocrflow.types import DocStatus, PageResult, PageStatus, Route


def _page(
    n: int,
    route: Route = Route.ENGINE,
    status: PageStatus = PageStatus.OK,
    reason: str | None = None,
) -> PageResult:
    return PageResult(n, "t", route, status, reason=reason, error=reason)


def test_all_ok() -> None:
    assert assemble_document("d", "s", [_page(2), _page(1)], 2).status is DocStatus.OK


def test_some_failed_is_partial_all_failed_is_failed() -> None:
    partial = assemble_document(
        "d", "s", [_page(1), _page(2, status=PageStatus.FAILED, reason="timeout")], 2
    )
    assert partial.status is DocStatus.PARTIAL and "timeout x1" in (partial.message or "")
    failed = assemble_document(
        "d", "s", [_page(1, status=PageStatus.FAILED, reason="too_large")], 1
    )
    assert failed.status is DocStatus.FAILED and failed.reason == "too_large"


def test_fallback_share_over_limit_is_partial() -> None:
    pages = [_page(1), _page(2, Route.FALLBACK, reason="engine_error")]
    assert assemble_document("d", "s", pages, 2).status is DocStatus.PARTIAL
    assert assemble_document("d", "s", pages, 2, max_fallback_rate=0.5).status is DocStatus.OK


def test_document_id_is_deterministic_and_setting_dependent() -> None:
    a = document_id("c" * 64, "fp1", "a.pdf")
    assert a == document_id("c" * 64, "fp1", "a.pdf")
    assert a != document_id("c" * 64, "fp2", "a.pdf") != document_id("c" * 64, "fp1", "b.pdf")
