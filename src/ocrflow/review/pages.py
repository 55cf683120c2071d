"""The review site's HTML, as small functions over escaped strings.

Every value that comes from a run (names, messages, errors, model output) passes through
``esc`` or ``review.markup``; nothing is inserted raw.
"""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ocrflow.review.assets import FILTER_SCRIPT, STYLE
from ocrflow.review.boxes import BOX_SCRIPT, BOX_STYLE, LOW_CONFIDENCE, confidence_text
from ocrflow.types import Route
from ocrflow.workspace.records import DoneRecord, PageSummary

STATUSES = ("ok", "partial", "failed")


def esc(value: object) -> str:
    """Text (or ``None``, shown as nothing) escaped for HTML text and quoted attributes."""
    return "" if value is None else html.escape(str(value), quote=True)


@dataclass(frozen=True, slots=True)
class DocumentFacts:
    """What the index says about one document."""

    doc_id: str
    name: str
    status: str
    reason: str
    message: str
    page_count: int
    routes: Mapping[str, int]
    flags: tuple[str, ...]


def document_facts(record: DoneRecord, *, source_exists: bool) -> DocumentFacts:
    """The index's view of a done marker; ``flags`` name what a reviewer may filter on."""
    routes = Counter(str(page.route) for page in record.pages)
    flags = []
    if routes.get(Route.FALLBACK):
        flags.append("fallback")
    if any(page.attempts > 1 for page in record.pages):
        flags.append("retried")
    if any(page.status == "failed" for page in record.pages):
        flags.append("failed-pages")
    if not source_exists:
        flags.append("missing-source")
    return DocumentFacts(
        doc_id=record.doc_id,
        name=record.rel or record.source,
        status=str(record.status),
        reason=record.reason or "",
        message=record.message or "",
        page_count=record.page_count or len(record.pages),
        routes=dict(sorted(routes.items())),
        flags=tuple(flags),
    )


def _routes_text(routes: Mapping[str, int]) -> str:
    return ", ".join(f"{route} ×{count}" for route, count in routes.items())


def _pages_text(count: int) -> str:
    return f"{count} page" if count == 1 else f"{count} pages"


def _head(title: str) -> str:
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta name="generator" content="ocrflow review"><title>{esc(title)}</title>'
        f"<style>{STYLE}{BOX_STYLE}</style></head><body>\n"
    )


def index_row(facts: DocumentFacts, href: str) -> str:
    """One document's row in the index table."""
    search = " ".join((facts.name, facts.reason, facts.message)).lower()
    return (
        f'<tr class="doc" data-status="{esc(facts.status)}" '
        f'data-routes="{esc(" ".join(facts.routes))}" data-flags="{esc(" ".join(facts.flags))}" '
        f'data-search="{esc(search)}">'
        f'<td><a href="{esc(href)}">{esc(facts.name)}</a></td>'
        f'<td class="status status-{esc(facts.status)}">{esc(facts.status)}</td>'
        f"<td>{facts.page_count}</td><td>{esc(_routes_text(facts.routes))}</td>"
        f'<td>{esc(facts.reason)}</td><td class="message">{esc(facts.message)}</td>'
        f"<td>{esc(' '.join(facts.flags))}</td></tr>\n"
    )


def _options(label: str, element_id: str, values: Iterable[str]) -> str:
    options = "".join(f'<option value="{esc(v)}">{esc(v)}</option>' for v in values)
    return (
        f'<label>{esc(label)} <select id="{element_id}"><option value="">any</option>'
        f"{options}</select></label>"
    )


def index_head(
    title: str, scope: str, statuses: Mapping[str, int], routes: Iterable[str], shown: int
) -> str:
    """The index page up to its table's first row: title, counts and the filter controls."""
    counts = ", ".join(f"{status} {statuses.get(status, 0)}" for status in STATUSES)
    controls = (
        _options("status", "f-status", STATUSES)
        + _options("page route", "f-route", sorted(routes))
        + _options("flag", "f-flag", ("fallback", "retried", "failed-pages", "missing-source"))
        + '<label>search <input id="f-text" type="search" placeholder="name, reason"></label>'
        + f'<span>showing <b id="shown">{shown}</b> of {shown}</span>'
    )
    return (
        _head(title)
        + f'<header><h1>{esc(title)}</h1><p class="muted">{esc(scope)}</p>'
        + f'<p id="counts">{esc(counts)}</p><div class="filters">{controls}</div></header>\n'
        + '<main><table class="docs" id="docs"><thead><tr><th>document</th><th>status</th>'
        + "<th>pages</th><th>page routes</th><th>reason</th><th>message</th><th>flags</th>"
        + "</tr></thead><tbody>\n"
    )


def index_tail() -> str:
    """The end of the index page, with the filter script."""
    return f"</tbody></table></main><script>{FILTER_SCRIPT}</script></body></html>\n"


@dataclass(frozen=True, slots=True)
class PageView:
    """One page as the document view shows it: its record, image and Markdown (as HTML);
    ``overlay`` is the HTML of its block boxes over the image (``review.boxes``),
    ``confidence`` the engine's mean (``None``: none given), ``low_lines`` how many of its
    lines were read below ``LOW_CONFIDENCE``."""

    summary: PageSummary
    image_src: str | None
    image_error: str | None
    markdown_html: str
    overlay: str = ""
    confidence: float | None = None
    low_lines: int = 0


def page_meta(summary: PageSummary) -> str:
    """The page's route, status, attempts and the engine's notes, on one line."""
    attributes = summary.attributes
    parts = [
        f"route {summary.route}",
        f"status {summary.status}",
        f"attempts {summary.attempts}",
    ]
    for key in ("engine", "fallback", "fallback_engine", "rotation"):
        if attributes.get(key) not in (None, "", 0):
            parts.append(f"{key.replace('_', ' ')} {attributes[key]}")
    if summary.latency_s:
        parts.append(f"{summary.latency_s:.1f} s")
    if summary.tokens_out:
        parts.append(f"tokens {summary.tokens_in}/{summary.tokens_out}")
    return " · ".join(parts)


def page_section(view: PageView, doc_name: str) -> str:
    """One page: its facts, its image beside its Markdown."""
    summary = view.summary
    problem = ""
    if summary.error or summary.reason:
        label = "fallback reason" if summary.route == Route.FALLBACK else "error"
        detail = " ".join(
            p for p in (f"[{summary.reason}]" if summary.reason else "", summary.error or "") if p
        )
        problem = f'<p class="error">{label}: {esc(detail)}</p>'
    if view.image_src:
        image = (
            f'<div class="page-figure"><img class="page-image" src="{esc(view.image_src)}" '
            f'alt="page {summary.page} of {esc(doc_name)}">{view.overlay}</div>'
        )
    else:
        image = f'<p class="missing">no page image: {esc(view.image_error)}</p>'
    markdown = view.markdown_html or '<p class="muted">(no text)</p>'
    return (
        f'<section class="page" id="page-{summary.page}" data-page="{summary.page}" '
        f'data-route="{esc(summary.route)}"><h2>Page {summary.page}</h2>'
        f'<p class="meta">{_confidence(view)} · {esc(page_meta(summary))}</p>{problem}'
        f'<div class="cols"><div class="image">{image}</div>'
        f'<div class="markdown">{markdown}</div></div></section>\n'
    )


def _confidence(view: PageView) -> str:
    """The page's confidence, flagged when it or any of its lines is low."""
    low = view.low_lines or (view.confidence is not None and view.confidence < LOW_CONFIDENCE)
    lines = ""
    if view.low_lines:
        lines = f" ({view.low_lines} line{'s' if view.low_lines > 1 else ''} < {LOW_CONFIDENCE})"
    return (
        f'<span class="confidence{" low" if low else ""}" '
        f'data-confidence="{esc(view.confidence)}">'
        f"confidence {confidence_text(view.confidence)}{esc(lines)}</span>"
    )


def document_head(
    facts: DocumentFacts, record: DoneRecord, index_href: str, tools: str = ""
) -> str:
    """A document page's header: name, status, reason and where it came from; ``tools``
    are the box toggles and legend (``review.boxes.box_tools``)."""
    reason = ""
    if facts.reason or facts.message:
        reason = f'<p class="error" id="reason">[{esc(facts.reason)}] {esc(facts.message)}</p>'
    routes = _routes_text(facts.routes) or "no pages read"
    missing = ""
    if "missing-source" in facts.flags:
        missing = '<p class="missing" id="missing-source">the source file no longer exists</p>'
    return (
        _head(facts.name)
        + f'<header><p><a href="{esc(index_href)}">← all documents</a></p>'
        + f"<h1>{esc(facts.name)}</h1>"
        + f'<p><span class="status status-{esc(facts.status)}">{esc(facts.status)}</span> · '
        + f"{_pages_text(facts.page_count)} · {esc(routes)}</p>"
        + reason
        + missing
        + f'<p class="muted">source {esc(record.source)} · id {esc(record.doc_id)}</p>'
        + tools
        + "</header><main>\n"
    )


def whole_text_section(markdown_html: str, origin: str) -> str:
    """The document's whole Markdown, for runs that kept no per-page text."""
    return (
        f'<section class="whole"><p class="muted">whole document ({esc(origin)}; '
        f"this run kept no per-page text)</p>"
        f'<div class="markdown">{markdown_html}</div></section>\n'
    )


def document_tail(toggles: bool = False) -> str:
    """The end of a document page; with ``toggles``, the box toggles' script."""
    script = f"<script>{BOX_SCRIPT}</script>" if toggles else ""
    return f"</main>{script}</body></html>\n"
