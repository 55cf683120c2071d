"""The FastAPI application of ``ocrflow serve`` (OpenAPI at ``/docs``)."""

from __future__ import annotations

import contextlib
import importlib
import logging
import tempfile
import zipfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Annotated, Any, Literal

from fastapi import Depends, FastAPI, Header, HTTPException, Query, Request, Security
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response, StreamingResponse

from . import apidocs
from .auth import TokenSet
from .background import Background
from .contract import (
    BEARER,
    JobCreated,
    deleted_job_links,
    error_responses,
    install,
    job_links,
    job_request_body,
)
from .db import Job
from .guards import ServiceGuards
from .jobs import JobStore, job_view
from .layout import JOB_ID, JobDir, JobMeta, new_job_id
from .options import OptionError
from .quotas import QuotaExceeded, Quotas
from .requests import RequestLimits, read_job_request
from .scheduler import SchedulerSettings
from .uploads import UploadError

log = logging.getLogger("ocrflow.service")
CHUNK = 1 << 16
#: The largest ``offset`` of ``GET /v1/jobs`` (SQLite and PostgreSQL take 64-bit integers).
MAX_OFFSET = 1 << 40
#: Optional modules whose ``router`` is included when present (the web page, metrics).
OPTIONAL_ROUTERS = ("ocrflow.service.web", "ocrflow.service.metrics")

#: What ``GET /v1/jobs/{id}/results`` answers: JSONL records, or a zip.
_RESULT_TYPES = {
    "application/x-ndjson": {"schema": {"type": "string"}},
    "application/zip": {"schema": {"type": "string", "format": "binary"}},
}


@dataclass
class Service:
    """Everything the routes share (``app.state.service``)."""

    jobs: JobStore
    tokens: TokenSet
    limits: RequestLimits
    scheduler: SchedulerSettings
    #: Admission per token (``ServiceSettings.quotas``); made from the job store if omitted.
    quotas: Quotas | None = None

    def __post_init__(self) -> None:
        if self.quotas is None:
            self.quotas = Quotas(self.jobs.db, self.jobs.settings.quotas)


def create_app(service: Service) -> FastAPI:
    """The application; in-process workers and the job sync run while it is up."""

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        background = Background(service.jobs, service.scheduler)
        background.start()
        try:
            yield
        finally:
            await run_in_threadpool(background.stop)

    app = FastAPI(
        title="ocrflow",
        summary="Documents to Markdown and JSONL",
        lifespan=lifespan,
        docs_url=None,  # served from the package instead (``apidocs``): no CDN
        redoc_url=None,
    )
    app.state.service = service
    install(app, tokens=service.tokens.enabled)
    _add_routes(app)
    _add_changes(app)
    app.include_router(apidocs.router)
    include_optional_routers(app)
    return app


def guarded_app(service: Service) -> ServiceGuards:
    """The application inside its guards (security headers, Host/Origin checks without
    tokens, client disconnects logged as one line): what ``ocrflow serve`` runs."""
    return ServiceGuards(create_app(service), open_access=not service.tokens.enabled)


def include_optional_routers(app: FastAPI) -> None:
    """Include the ``router`` of each module of ``OPTIONAL_ROUTERS`` that is installed: the
    API works without them, and they reach the service through ``app.state.service``."""
    for name in OPTIONAL_ROUTERS:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        if hasattr(module, "router"):
            app.include_router(module.router)


def owner_of(request: Request, _declared: Annotated[Any, Security(BEARER)] = None) -> str:
    """The caller's owner id (its token's hash); 401 without a valid token. (``BEARER``
    declares the token in the OpenAPI; ``TokenSet`` checks it.)"""
    service: Service = request.app.state.service
    owner = service.tokens.owner(request.headers.get("authorization"))
    if owner is None:
        raise HTTPException(401, "a valid bearer token is required", {"WWW-Authenticate": "Bearer"})
    return owner


Owner = Annotated[str, Depends(owner_of)]


def _service(request: Request) -> Service:
    service: Service = request.app.state.service
    return service


def _own_job(request: Request, owner: str, job_id: str) -> Job:
    if not JOB_ID.match(job_id):
        raise HTTPException(404, "no such job")
    return _found(_service(request).jobs.get(owner, job_id))


def _found(row: Job | None) -> Job:
    """The job's row; 404 when there is none (a job of another owner, or removed)."""
    if row is None:
        raise HTTPException(404, "no such job")
    return row


def _add_routes(app: FastAPI) -> None:
    @app.get("/health", tags=["service"], operation_id="health")
    def health() -> dict[str, str]:
        """Liveness: the API answers."""
        return {"status": "ok"}

    @app.post(
        "/v1/jobs",
        status_code=201,
        tags=["jobs"],
        operation_id="create_job",
        response_model=JobCreated,
        responses={
            200: {
                "model": JobCreated,
                "description": "The job of an earlier Idempotency-Key",
                "links": job_links(),
            },
            201: {"description": "The new job", "links": job_links()},
            **error_responses(400, 401, 413, 415, 422, 429),
        },
        openapi_extra=job_request_body(),
    )
    async def create_job(
        request: Request,
        owner: Owner,
        idempotency_key: Annotated[str | None, Header(max_length=200)] = None,
    ) -> JSONResponse:
        """Create a job from uploaded ``files`` and/or ``uris``, with ``options`` named as
        ``ocrflow run``'s. A repeated ``Idempotency-Key`` returns the first job (200), once
        the body is checked as a new job's would be (a body that is no job request is still
        refused)."""
        service = _service(request)
        if idempotency_key:
            earlier = await run_in_threadpool(service.jobs.by_key, owner, idempotency_key)
            if earlier is not None:
                await _create(request, service, owner, idempotency_key, earlier=earlier)
                return JSONResponse({"id": earlier.id, "status": earlier.status}, 200)
        assert service.quotas is not None
        try:
            async with service.quotas.admitted(owner):
                row = await _create(request, service, owner, idempotency_key)
        except QuotaExceeded as exc:
            raise HTTPException(exc.status, str(exc), exc.headers()) from None
        return JSONResponse({"id": row.id, "status": row.status}, 201)

    @app.get(
        "/v1/jobs", tags=["jobs"], operation_id="list_jobs", responses=error_responses(401, 422)
    )
    def list_jobs(
        request: Request,
        owner: Owner,
        status: Literal["queued", "running", "done", "failed", "cancelled"] | None = None,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
        # Bounded: a larger offset than any database integer would be a 500, not an answer.
        offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
    ) -> dict[str, Any]:
        """The caller's jobs, newest first; ``next`` is the offset of the next page."""
        rows = _service(request).jobs.page(owner, status, limit + 1, offset)
        more = len(rows) > limit
        return {
            "jobs": [job_view(r) for r in rows[:limit]],
            "next": offset + limit if more else None,
        }

    @app.get(
        "/v1/jobs/{job_id}",
        tags=["jobs"],
        operation_id="get_job",
        responses=error_responses(401, 404),
    )
    def get_job(request: Request, owner: Owner, job_id: str) -> dict[str, Any]:
        """A job's status and progress."""
        return job_view(_own_job(request, owner, job_id))

    @app.get(
        "/v1/jobs/{job_id}/results",
        tags=["jobs"],
        operation_id="job_results",
        response_class=Response,
        responses={200: {"content": _RESULT_TYPES}, **error_responses(401, 404, 422)},
    )
    def job_results(
        request: Request,
        owner: Owner,
        job_id: str,
        format: Literal["jsonl", "markdown", "parquet"] = "jsonl",
    ) -> StreamingResponse:
        """The finished documents: JSONL records (a stream), or a zip of the Markdown tree
        or of the Parquet shards (when the job asked for ``parquet``)."""
        row = _own_job(request, owner, job_id)
        jobs = _service(request).jobs
        headers = {"X-Job-Status": row.status}
        if format == "jsonl":
            files = list(jobs.result_files(job_id, "results", ".jsonl"))
            return StreamingResponse(_concat(files), media_type="application/x-ndjson",
                                     headers=headers)  # fmt: skip
        folder, suffix = ("markdown", ".md") if format == "markdown" else ("parquet", ".parquet")
        if format == "parquet" and "parquet" not in row.options.get("format", ""):
            raise HTTPException(404, "this job did not ask for parquet output")
        base = JobDir(jobs.settings.root, job_id).out / folder
        archive = _zip(base, list(jobs.result_files(job_id, folder, suffix)))
        headers["Content-Disposition"] = f'attachment; filename="{job_id}-{folder}.zip"'
        return StreamingResponse(_drain(archive), media_type="application/zip", headers=headers)


def _add_changes(app: FastAPI) -> None:
    """The routes that change a job: cancel it, delete it."""

    @app.post(
        "/v1/jobs/{job_id}/cancel",
        tags=["jobs"],
        operation_id="cancel_job",
        responses=error_responses(401, 404),
    )
    def cancel_job(request: Request, owner: Owner, job_id: str) -> dict[str, Any]:
        """Cancel a job: workers stop claiming its documents and its running pages stop
        within a second; its finished documents and page checkpoints stay readable."""
        _own_job(request, owner, job_id)
        return job_view(_found(_service(request).jobs.cancel(owner, job_id)))

    @app.delete(
        "/v1/jobs/{job_id}",
        tags=["jobs"],
        operation_id="delete_job",
        responses={
            200: {
                "description": "The job as it was last, with status `deleted`; from now on "
                "every read of it is a 404",
                "links": deleted_job_links(),
            },
            **error_responses(401, 404),
        },
    )
    def delete_job(request: Request, owner: Owner, job_id: str) -> dict[str, Any]:
        """Delete a job: cancelled first if it still runs, then gone with its results (its
        folder is removed once no worker holds it). A second DELETE is a 404."""
        if not JOB_ID.match(job_id):
            raise HTTPException(404, "no such job")
        view = _service(request).jobs.delete(owner, job_id)
        if view is None:
            raise HTTPException(404, "no such job")
        return view


async def _create(
    request: Request, service: Service, owner: str, key: str | None, earlier: Any = None
) -> Any:
    """The new job's row; with ``earlier`` (the job of a repeated key) the body is read and
    checked only, then dropped, and ``earlier`` is returned."""
    job = JobDir(service.jobs.settings.root, new_job_id())
    try:
        asked = await read_job_request(request, job.inputs, service.limits)
        if not asked.files and not asked.uris:
            raise OptionError("the job names no document: send files or uris")
        if earlier is not None:
            service.jobs.discard(job)
            return earlier
        meta = JobMeta(
            id=job.id,
            owner=owner,
            idempotency_key=key,
            callback_url=asked.callback_url,
            options=asked.options.model_dump(exclude_none=True),
            uris=asked.uris,
        )
        await run_in_threadpool(service.jobs.plan, job, meta, asked.options)
        row = await run_in_threadpool(service.jobs.insert, meta)
    except UploadError as exc:
        service.jobs.discard(job)
        raise HTTPException(exc.status, str(exc)) from None
    except OptionError as exc:
        service.jobs.discard(job)
        raise HTTPException(422, str(exc)) from None
    except BaseException:
        service.jobs.discard(job)
        raise
    if row.id != job.id:  # the same Idempotency-Key won a race: keep the first job only
        service.jobs.discard(job)
    return row


def _concat(files: list[Path]) -> Iterator[bytes]:
    for path in files:
        with path.open("rb") as handle:
            while chunk := handle.read(CHUNK):
                yield chunk


def _zip(base: Path, files: list[Path]) -> IO[bytes]:
    """A zip of ``files`` (named relative to ``base``) in an anonymous temp file."""
    handle = tempfile.TemporaryFile()  # noqa: SIM115 (closed by _drain after streaming)
    with zipfile.ZipFile(handle, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in files:
            archive.write(path, path.relative_to(base).as_posix())
    handle.seek(0)
    return handle


def _drain(handle: IO[bytes]) -> Iterator[bytes]:
    with handle:
        while chunk := handle.read(CHUNK):
            yield chunk
