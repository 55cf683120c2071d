"""Runs made by hand for ``ocrflow review`` tests: real done markers and JSONL records written
by the real workspace and sink, without OCR (fast), from page texts a test chooses."""

from __future__ import annotations

from pathlib import Path

from ocrflow.sinks import DocumentMeta, FinishedDocument, JsonlSink
from ocrflow.storage.local import LocalStore
from ocrflow.types import DocStatus, DocumentResult, PageResult, Route
from ocrflow.workspace.state import Workspace

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"


def page(number: int, text: str, route: Route = Route.ENGINE, **kw: object) -> PageResult:
    """A page result as a reader would return it."""
    return PageResult(number, text, route, **kw)  # type: ignore[arg-type]


def add_document(
    out: Path,
    doc_id: str,
    source: Path | str,
    pages: list[PageResult],
    status: DocStatus = DocStatus.OK,
    reason: str | None = None,
    message: str | None = None,
) -> None:
    """Write one finished document into the run at ``out`` (JSONL when it has text)."""
    store = LocalStore(out)
    if not store.exists(".ocrflow/config.json"):
        store.write_bytes(".ocrflow/config.json", b'{"fingerprint": "test"}')
    result = DocumentResult(doc_id, str(source), status, tuple(pages), len(pages), reason, message)
    meta = DocumentMeta(Path(str(source)).name, "0" * 64, None, "embedded", "test")
    JsonlSink(store).write(FinishedDocument(result, meta))
    Workspace(store).mark_done(result, rel=meta.rel)


def make_mixed_run(out: Path, count: int = 12) -> dict[str, str]:
    """``count`` documents whose source is ``examples/born-digital.pdf``;
    statuses cycle ok, partial (a fallback page), failed (no pages). Returns id → status."""
    statuses: dict[str, str] = {}
    source = EXAMPLES / "born-digital.pdf"
    for n in range(count):
        doc_id = f"doc{n:04d}"
        kind = ("ok", "partial", "failed")[n % 3]
        if kind == "ok":
            add_document(out, doc_id, source, [page(1, f"# Document {n}\n\nbody {n}")])
        elif kind == "partial":
            pages = [
                page(1, f"text {n}"),
                page(
                    2,
                    f"layer {n}",
                    Route.FALLBACK,
                    attempts=3,
                    error="HTTP 500 x3",
                    reason="engine_error",
                    attributes={"fallback": "text_layer"},
                ),
            ]
            add_document(
                out,
                doc_id,
                source,
                pages,
                DocStatus.PARTIAL,
                "fallback_pages",
                "1 of 2 pages fell back: HTTP 500 x3",
            )
        else:
            add_document(
                out, doc_id, source, [], DocStatus.FAILED, "corrupt", f"not a readable PDF {n}"
            )
        statuses[doc_id] = kind
    return statuses
