"""A finished job's documents as the web page shows them: each page's route, status and
Markdown rendered to safe HTML, and the page image rendered on demand.

Everything here reads the job's OUT (``ROOT/jobs/<id>/out``) through ``sinks.results``: the
done markers alone for the list, a ``Document`` (its pages' routes, statuses and Markdown)
for one document's view. Page images are rendered from the job's
input file in a :class:`RenderPool` worker process, never in the API process: PDFium is not
thread-safe, and an uploaded file may be hostile (the pool's time and memory caps hold).
:class:`PreviewRenderer` shares those processes fairly: each token may have only a few
renders at once (a token rendering slow pages cannot take every process), and a page
rendered once is served from a cache.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter, OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from markdown_it import MarkdownIt

from ocrflow.document import Page
from ocrflow.errors import OcrflowError
from ocrflow.render.jobs import PageJob, RenderSpec
from ocrflow.render.pool import RenderPool
from ocrflow.sinks.results import StoredDocument, done_marker, done_markers, find_document
from ocrflow.storage.open import open_store
from ocrflow.types import Route
from ocrflow.workspace.records import DoneRecord, PageSummary
from ocrflow.workspace.state import Workspace

#: Longest side of a page image on the web page, px (a small JPEG, ~100-200 kB).
PREVIEW_DIM = 1000
#: Seconds a page that could not be rendered stays refused before it is tried again.
FAILED_PREVIEW_TTL_S = 60.0
#: Bytes a cached refusal counts for (so that the cache holds a bounded number of them).
_FAILURE_COST = 1024
#: A line read below this confidence (0..1) is marked on the page image, as in ``ocrflow
#: review`` (``review.boxes.LOW_CONFIDENCE``: the two cannot import each other).
LOW_CONFIDENCE = 0.8


class DocumentNotFound(LookupError):
    """No finished document of that id in the job, or no such page in it."""


def markdown_html(text: str) -> str:
    """Markdown as HTML that is safe to put in a page: raw HTML in the text is escaped
    (``html`` off), ``javascript:`` links are not made, and images become a placeholder
    (a figure link is relative to OUT and the browser could not fetch it anyway)."""
    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    md.add_render_rule("image", _image_placeholder)
    return md.render(text)


def _image_placeholder(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    alt = self.renderInline(tokens[idx].children or [], options, env)
    return f'<span class="figure">[figure{": " + alt if alt else ""}]</span>'


def list_documents(out: Path) -> list[dict[str, Any]]:
    """The job's finished documents: id, name, status, reason, page count and how many pages
    fell back or were not converted, by name."""
    markers = done_markers(open_store(str(out)))
    return sorted((_document_summary(m) for m in markers), key=lambda d: d["name"])


def _document_summary(record: DoneRecord) -> dict[str, Any]:
    return {
        "id": record.doc_id,
        "name": record.rel or Path(record.source).name,
        "status": str(record.status),
        "reason": record.reason,
        "pages": len(record.pages),
        "fallback_pages": sum(_is_fallback(p) for p in record.pages),
        "failed_pages": sum(p.status != "ok" for p in record.pages),
    }


def document_view(out: Path, doc_id: str) -> dict[str, Any]:
    """One document with its pages: number, route, status, reason, fallback and HTML, and
    what the page image shows over it (``page_boxes``)."""
    stored = _stored_document(out, doc_id)
    pages = [
        {
            "page": page.number,
            "route": str(page.route),
            "status": str(page.status),
            "reason": page.reason,
            "fallback": page.route is Route.FALLBACK,
            "html": markdown_html(page.markdown),
            **page_boxes(page),
        }
        for page in stored.document.pages
    ]
    summary = _document_summary(stored.marker)
    return summary | {"page_list": pages, "low_confidence": LOW_CONFIDENCE}


def page_boxes(page: Page) -> dict[str, Any]:
    """The page's confidence (``None``: the engine gave none), its blocks' boxes (label,
    ``bbox`` as fractions 0..1 of the page image, confidence; ``block`` is the index in the
    page's blocks) and the boxes of its lines read below ``LOW_CONFIDENCE``. Boxes are on
    the page as rendered, the preview image's orientation (not turned by ``rotation``)."""
    boxes = [
        {
            "block": index,
            "label": str(block.label),
            "source_label": block.source_label,
            "bbox": list(block.bbox),
            "confidence": block.confidence,
        }
        for index, block in enumerate(page.blocks)
        if block.bbox is not None
    ]
    low = [
        {"bbox": list(line.bbox), "confidence": line.confidence, "text": line.text}
        for block in page.blocks
        for line in block.lines
        if line.bbox is not None and line.confidence is not None
        and line.confidence < LOW_CONFIDENCE
    ]  # fmt: skip
    return {"confidence": page.confidence, "rotation": page.rotation, "boxes": boxes,
            "low_lines": low}  # fmt: skip


def _checked_id(doc_id: str) -> str:
    # Ids are hex digests: anything else never names a marker (and never a path).
    if not doc_id or not all(c in "0123456789abcdef" for c in doc_id):
        raise DocumentNotFound(doc_id)
    return doc_id


def _stored_document(out: Path, doc_id: str) -> StoredDocument:
    stored = find_document(open_store(str(out)), _checked_id(doc_id))
    if stored is None:
        raise DocumentNotFound(doc_id)
    return stored


def _done_record(out: Path, doc_id: str) -> DoneRecord:
    record = done_marker(open_store(str(out)), _checked_id(doc_id))
    if record is None:
        raise DocumentNotFound(doc_id)
    return record


def _is_fallback(page: PageSummary) -> bool:
    """The page's text came from the fallback engine (the VLM's answers were unusable)."""
    return page.route == "fallback"


def page_source(out: Path, doc_id: str, page: int) -> tuple[str, str]:
    """The local file a document's page is rendered from, and its kind (pdf or image)."""
    record = _done_record(out, doc_id)
    if page not in {p.page for p in record.pages}:
        raise DocumentNotFound(f"{doc_id} page {page}")
    # The input is checked again under the job's recorded policy: it may have been
    # replaced by a link (or a FIFO) since the job read it.
    policy = Workspace(open_store(str(out))).recorded_run_config().input.access
    try:
        path = Path(policy.check_local_file(record.source))
        if not path.is_file():
            raise DocumentNotFound(f"{doc_id}: its input is gone")
        with path.open("rb") as head:
            kind = "pdf" if head.read(5) == b"%PDF-" else "image"
    except (OcrflowError, OSError):
        raise DocumentNotFound(f"{doc_id}: its input cannot be read") from None
    return str(path), kind


async def render_preview(pool: RenderPool, path: str, kind: str, page: int) -> bytes | None:
    """A JPEG of one page (longest side ``PREVIEW_DIM``), or ``None`` when it cannot be
    rendered (encrypted, broken, too large: the page's record says why)."""
    spec = RenderSpec(target_dim=PREVIEW_DIM, text_layer="off", encoding="jpeg")
    rendered = await pool.render(PageJob(path, kind, (page,), spec, force_image=True))
    image = rendered[0].image if rendered else None
    return image.data if image is not None else None


@dataclass(frozen=True)
class PreviewLimits:
    """How previews share the machine: processes, renders per token, cache size."""

    workers: int = 2
    per_owner: int = 1
    cache_bytes: int = 64 << 20
    timeout_s: float = 15.0
    memory_mb: int = 1536


class PreviewBusy(Exception):
    """The token has as many renders running as it may: try again in ``retry_after_s``."""

    def __init__(self, limit: int, retry_after_s: int = 1) -> None:
        super().__init__(f"too many page images rendering: at most {limit} at once per token")
        self.retry_after_s = retry_after_s


PreviewKey = tuple[str, str, int]


class PreviewRenderer:
    """Page previews rendered in their own processes (started on the first image asked
    for), at most ``per_owner`` at once for one token, cached by (job, document, page).

    A render runs as its own task: a client that hangs up does not free its token's place
    before the process is free again, and a second request for the same page waits for the
    first render instead of starting another."""

    def __init__(self, limits: PreviewLimits | None = None) -> None:
        self.limits = limits or PreviewLimits()
        self._pool: RenderPool | None = None
        self._cache: OrderedDict[PreviewKey, tuple[bytes | None, float]] = OrderedDict()
        self._cached_bytes = 0
        self._running: Counter[str] = Counter()
        self._renders: dict[PreviewKey, asyncio.Task[bytes | None]] = {}

    async def render(self, owner: str, key: PreviewKey, path: str, kind: str) -> bytes | None:
        """The JPEG of page ``key[2]`` of the file (``None``: it cannot be rendered);
        ``PreviewBusy`` when ``owner`` already has its renders running."""
        cached = self._cached(key)
        if cached is not None:
            return cached[0]
        task = self._renders.get(key)
        if task is None:
            if self._running[owner] >= self.limits.per_owner:
                raise PreviewBusy(self.limits.per_owner)
            self._running[owner] += 1
            task = asyncio.get_running_loop().create_task(self._render(owner, key, path, kind))
            self._renders[key] = task
        return await asyncio.shield(task)

    async def _render(self, owner: str, key: PreviewKey, path: str, kind: str) -> bytes | None:
        try:
            data = await render_preview(self.pool(), path, kind, key[2])
            self._store(key, data)
            return data
        finally:
            self._renders.pop(key, None)
            self._running[owner] -= 1
            if self._running[owner] <= 0:
                del self._running[owner]

    def _cached(self, key: PreviewKey) -> tuple[bytes | None] | None:
        entry = self._cache.get(key)
        if entry is None:
            return None
        data, expires = entry
        if expires and expires < time.monotonic():
            self._drop(key)
            return None
        self._cache.move_to_end(key)
        return (data,)

    def _store(self, key: PreviewKey, data: bytes | None) -> None:
        if key in self._cache:
            self._drop(key)
        expires = 0.0 if data is not None else time.monotonic() + FAILED_PREVIEW_TTL_S
        self._cache[key] = (data, expires)
        self._cached_bytes += _cost(data)
        while self._cached_bytes > self.limits.cache_bytes and len(self._cache) > 1:
            self._drop(next(iter(self._cache)))

    def _drop(self, key: PreviewKey) -> None:
        data, _ = self._cache.pop(key)
        self._cached_bytes -= _cost(data)

    def pool(self) -> RenderPool:
        """The render processes (started now if they are not)."""
        if self._pool is None:
            self._pool = RenderPool(
                self.limits.workers, page_timeout_s=self.limits.timeout_s,
                memory_mb=self.limits.memory_mb,
            )  # fmt: skip
        return self._pool

    def close(self) -> None:
        """Stop the processes (renders still running fail)."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None


def _cost(data: bytes | None) -> int:
    return len(data) if data is not None else _FAILURE_COST
