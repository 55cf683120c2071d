"""A finished job's documents as the web page shows them: each page's route, status and
Markdown rendered to safe HTML, and the page image rendered on demand.

Everything here reads the job's workspace (``ROOT/jobs/<id>/out``): done markers for the
documents and their pages, ``results/<doc id>.jsonl`` for the text (its
``pdf_page_numbers`` spans cut it into pages). Page images are rendered from the job's
input file in a :class:`RenderPool` worker process, never in the API process: PDFium is not
thread-safe, and an uploaded file may be hostile (the pool's time and memory caps hold).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from markdown_it import MarkdownIt

from ocrflow.records import DoneRecord, PageSummary
from ocrflow.render.jobs import PageJob, RenderSpec
from ocrflow.render.pool import RenderPool
from ocrflow.storage import open_store
from ocrflow.workspace import Workspace

#: Longest side of a page image on the web page, px (a small JPEG, ~100-200 kB).
PREVIEW_DIM = 1000


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
    records = Workspace(open_store(str(out))).done_records()
    return sorted((_document_summary(r) for r in records), key=lambda d: d["name"])


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
    """One document with its pages: number, route, status, reason, fallback and HTML."""
    record = _done_record(out, doc_id)
    texts = _page_texts(out / "results" / f"{doc_id}.jsonl")
    pages = [
        {
            "page": p.page,
            "route": p.route,
            "status": p.status,
            "reason": p.reason,
            "fallback": _is_fallback(p),
            "html": markdown_html(texts.get(p.page, "")),
        }
        for p in sorted(record.pages, key=lambda p: p.page)
    ]
    return _document_summary(record) | {"page_list": pages}


def _done_record(out: Path, doc_id: str) -> DoneRecord:
    # Ids are hex digests: anything else never names a marker (and never a path).
    if not doc_id or not all(c in "0123456789abcdef" for c in doc_id):
        raise DocumentNotFound(doc_id)
    record = Workspace(open_store(str(out))).done_record(doc_id)
    if record is None:
        raise DocumentNotFound(doc_id)
    return record


def _is_fallback(page: PageSummary) -> bool:
    """The page's text came from the fallback engine (the VLM's answers were unusable)."""
    return page.route == "fallback"


def _page_texts(path: Path) -> dict[int, str]:
    """``{page: text}`` from a document's Dolma record (empty when it has none)."""
    try:
        record = json.loads(path.read_text(encoding="utf-8").splitlines()[0])
    except (OSError, IndexError, ValueError):
        return {}
    text = record.get("text", "")
    spans = record.get("attributes", {}).get("pdf_page_numbers", [])
    return {int(page): text[start:end] for start, end, page in spans}


def page_source(out: Path, doc_id: str, page: int) -> tuple[str, str]:
    """The local file a document's page is rendered from, and its kind (pdf or image)."""
    record = _done_record(out, doc_id)
    if page not in {p.page for p in record.pages}:
        raise DocumentNotFound(f"{doc_id} page {page}")
    path = Path(record.source)
    if not path.is_file():
        raise DocumentNotFound(f"{doc_id}: its input is gone")
    with path.open("rb") as head:
        kind = "pdf" if head.read(5) == b"%PDF-" else "image"
    return str(path), kind


async def render_preview(pool: RenderPool, path: str, kind: str, page: int) -> bytes | None:
    """A JPEG of one page (longest side ``PREVIEW_DIM``), or ``None`` when it cannot be
    rendered (encrypted, broken, too large: the page's record says why)."""
    spec = RenderSpec(target_dim=PREVIEW_DIM, text_layer="off", encoding="jpeg")
    rendered = await pool.render(PageJob(path, kind, (page,), spec, force_image=True))
    image = rendered[0].image if rendered else None
    return image.data if image is not None else None
