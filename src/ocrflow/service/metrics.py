"""``GET /metrics`` of ``ocrflow serve``: the ``ocrflow_*`` metrics (``ocrflow.metrics``).

The in-process workers report pages, documents and engine requests to the service's one
``Metrics`` (``SchedulerSettings.metrics``); each scrape first sets the gauges only the
database knows: jobs by status and the pages of unfinished jobs not done yet. No token is
asked for (Prometheus scrapes it; it names no job, owner or file).
"""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import Response
from sqlalchemy import func, select

from ocrflow.observe.metrics import CONTENT_TYPE, Metrics

from .db import TERMINAL, Database, Job

JOB_STATUSES = ("queued", "running", *TERMINAL)

#: Included by the service's app factory (``app.OPTIONAL_ROUTERS``).
router = APIRouter()


@router.get("/metrics", include_in_schema=False)
def scrape(request: Request) -> Response:
    """The Prometheus text exposition."""
    service = request.app.state.service
    metrics: Metrics | None = getattr(service.scheduler, "metrics", None)
    if metrics is None:
        raise HTTPException(404, "metrics are off")
    refresh_job_gauges(metrics, service.jobs.db)
    return Response(metrics.render(), media_type=CONTENT_TYPE)


def refresh_job_gauges(metrics: Metrics, database: Database) -> None:
    """Set ``ocrflow_jobs{status}`` (every status, 0 included) and ``ocrflow_queue_pages``
    from the job table, in one grouped query."""
    query = select(Job.status, func.count(), func.sum(Job.pages_total - Job.pages_done))
    with database.session() as session:
        rows = session.execute(query.group_by(Job.status)).all()
    counts = dict.fromkeys(JOB_STATUSES, 0)
    queued = 0
    for status, count, left in rows:
        counts[status] = count
        if status not in TERMINAL:
            queued += max(0, int(left or 0))
    metrics.set_jobs(counts, queue_pages=queued)
