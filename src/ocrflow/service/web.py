"""The web page at ``/`` and the read-only document endpoints it needs.

The page is one server-sent HTML file with a little vanilla JavaScript (``static/``, no
build step). It keeps the token the user types in ``sessionStorage`` and calls the API with
it: upload (``POST /v1/jobs``), jobs with progress bars (``GET /v1/jobs`` every second), and
a finished document's pages, each image beside its Markdown rendered here to safe HTML."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from fastapi import APIRouter, HTTPException, Request, Security
from fastapi.responses import FileResponse, HTMLResponse, Response

from ocrflow.service.contract import BEARER, error_responses
from ocrflow.service.documents import (
    DocumentNotFound,
    PreviewBusy,
    PreviewLimits,
    PreviewRenderer,
    document_view,
    list_documents,
    page_source,
)
from ocrflow.service.layout import JOB_ID, JobDir

WEB = Path(__file__).resolve().parent / "static"
STATIC = {"app.js": "text/javascript", "style.css": "text/css"}
#: Seconds one preview may take to render (a hostile page is cut off, the API carries on).
PREVIEW_TIMEOUT_S = 15.0


def _preview_limits(app: Any) -> PreviewLimits:
    """The operator's preview limits (``--preview-workers``, ``--max-previews-per-token``)."""
    service = getattr(app.state, "service", None)
    quotas = getattr(getattr(getattr(service, "jobs", None), "settings", None), "quotas", None)
    if quotas is None:
        return PreviewLimits(timeout_s=PREVIEW_TIMEOUT_S)
    return PreviewLimits(
        workers=quotas.preview_workers,
        per_owner=quotas.max_previews_per_token,
        timeout_s=PREVIEW_TIMEOUT_S,
    )


@contextlib.asynccontextmanager
async def _lifespan(app: Any) -> AsyncIterator[None]:
    # Its processes start on the first image asked for: a service nobody browses has none.
    renderer = PreviewRenderer(_preview_limits(app))
    app.state.page_renderer = renderer
    try:
        yield
    finally:
        await asyncio.to_thread(renderer.close)


#: Included by the service's app factory (``app.OPTIONAL_ROUTERS``); its state lives on the
#: app (``app.state.service``, ``app.state.page_renderer``), none here.
router = APIRouter(lifespan=_lifespan)
#: Declares the bearer token in the OpenAPI; ``find_job`` checks it.
_TOKEN = [Security(BEARER)]


def find_job(request: Request, job_id: str) -> Path:
    """The workspace of the caller's job ``job_id``: 401 without a valid token, 404 for an
    unknown id or another owner's job (the same rules as ``GET /v1/jobs/{id}``)."""
    service = request.app.state.service
    owner = service.tokens.owner(request.headers.get("authorization"))
    if owner is None:
        raise HTTPException(401, "a valid bearer token is required", {"WWW-Authenticate": "Bearer"})
    if not JOB_ID.match(job_id) or service.jobs.get(owner, job_id) is None:
        raise HTTPException(404, "no such job")
    return JobDir(service.jobs.settings.root, job_id).out


@router.get(
    "/v1/jobs/{job_id}/documents",
    tags=["documents"],
    operation_id="job_documents",
    dependencies=_TOKEN,
    responses=error_responses(401, 404),
)
def documents(request: Request, job_id: str) -> dict[str, Any]:
    """The job's finished documents (id, name, status, reason, pages, fallbacks)."""
    return {"documents": list_documents(find_job(request, job_id))}


@router.get(
    "/v1/jobs/{job_id}/documents/{doc_id}",
    tags=["documents"],
    operation_id="job_document",
    dependencies=_TOKEN,
    responses=error_responses(401, 404),
)
def document(request: Request, job_id: str, doc_id: str) -> dict[str, Any]:
    """One finished document: each page's route, status, fallback mark and HTML."""
    out = find_job(request, job_id)
    try:
        return document_view(out, doc_id)
    except DocumentNotFound:
        raise HTTPException(404, "no such document") from None


@router.get(
    "/v1/jobs/{job_id}/documents/{doc_id}/pages/{page}.jpg",
    tags=["documents"],
    operation_id="page_image",
    response_class=Response,
    dependencies=_TOKEN,
    responses={
        200: {"content": {"image/jpeg": {"schema": {"type": "string", "format": "binary"}}}},
        **error_responses(401, 404, 422, 429),
    },
)
async def page_image(request: Request, job_id: str, doc_id: str, page: int) -> Response:
    """A page of a finished document as a small JPEG, rendered now (or earlier: cached);
    429 while the caller's token has as many images rendering as it may."""
    out = await asyncio.to_thread(find_job, request, job_id)
    try:
        path, kind = await asyncio.to_thread(page_source, out, doc_id, page)
    except DocumentNotFound:
        raise HTTPException(404, "no such page") from None
    renderer: PreviewRenderer = request.app.state.page_renderer
    owner = request.app.state.service.tokens.owner(request.headers.get("authorization")) or ""
    try:
        data = await renderer.render(owner, (job_id, doc_id, page), path, kind)
    except PreviewBusy as exc:
        raise HTTPException(429, str(exc), {"Retry-After": str(exc.retry_after_s)}) from None
    if data is None:
        raise HTTPException(422, "this page cannot be rendered")
    return Response(data, media_type="image/jpeg", headers={"Cache-Control": "private"})


@router.get("/", include_in_schema=False)
def _index() -> HTMLResponse:
    return HTMLResponse((WEB / "index.html").read_text(encoding="utf-8"))


@router.get("/static/{name}", include_in_schema=False)
def _static(name: str) -> FileResponse:
    # Only the known files: a name is never joined to a path unchecked.
    if name not in STATIC:
        raise HTTPException(404, "not found")
    return FileResponse(WEB / name, media_type=STATIC[name])
