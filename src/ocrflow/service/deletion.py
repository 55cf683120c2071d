"""Deleting jobs: ``DELETE /v1/jobs/{id}`` takes a job away at once, its folder later.

The request marks the folder ``deleted`` (before anything else: a crash right after it must
not bring the job back) and removes the job's row: from then on every read of the job
answers 404, the job list omits it, its quota place is free, the workers let go of it
(``scheduler._stopped``) and a database rebuilt from the folders never sees it again
(``layout.job_ids``). The folder cannot go at that moment: a worker of this process or of
another machine may be converting its pages, and would write into a folder that is no
longer there. ``purge_deleted`` (the service's refresh loop, and ``ocrflow serve`` at
start) removes it once no slot of this process holds the job, no worker holds a lease on
it, and the marker is older than ``PURGE_GRACE_S`` (a worker that picked the job just
before it was deleted sees the marker and stops well within that time).
"""

from __future__ import annotations

import logging
import os
import shutil
import time
import uuid
from collections.abc import Collection
from pathlib import Path

from sqlalchemy import delete

from ocrflow.storage.open import open_store
from ocrflow.workspace.leases import LeaseManager

from .db import Database, Job
from .layout import DELETED, JobDir, deleted_job_ids

log = logging.getLogger("ocrflow.service")

#: Seconds a deleted job's folder stays after its deletion at least: workers notice the
#: marker within a poll (0.5 s) and release their leases when their pages stop.
PURGE_GRACE_S = 5.0
#: Folders being removed are first renamed to this prefix (not a job id: nobody reads them).
TRASH_PREFIX = ".trash-"


def purge_deleted(
    db: Database,
    root: Path,
    busy: Collection[str] = (),
    grace_s: float = PURGE_GRACE_S,
) -> list[str]:
    """Remove any row left of a job marked ``deleted``, and the folder of every such job
    that no worker holds: not in ``busy`` (this process's slots), no live lease, marked
    ``grace_s`` ago or more. Returns the ids removed; a job still held is left for the
    next call."""
    marked = deleted_job_ids(root)
    if marked:
        # Their rows went with the request, unless the service died in between.
        with db.session() as session:
            session.execute(delete(Job).where(Job.id.in_(marked)))
    removed = []
    now = time.time()
    for job_id in marked:
        job = JobDir(root, job_id)
        since = job.marked(DELETED)
        if job_id in busy or since is None or now - since < grace_s or _leased(job):
            continue
        _remove(job.path)
        removed.append(job_id)
    for trash in Path(root, "jobs").glob(f"{TRASH_PREFIX}*"):
        shutil.rmtree(trash, ignore_errors=True)  # a removal a crash interrupted
    if removed:
        log.info("purged %d deleted job(s)", len(removed))
    return removed


def _leased(job: JobDir) -> bool:
    """A worker (of any process) holds a live lease on one of the job's items."""
    try:
        return bool(LeaseManager(open_store(str(job.out)), "purge").active())
    except (OSError, ValueError):
        return True  # unreadable now: looked at again at the next call


def _remove(path: Path) -> None:
    """Rename the folder out of the jobs' names, then remove it: a removal cut short never
    leaves a ``job.json`` without its ``deleted`` marker (which a rebuild would take for a
    job)."""
    trash = path.with_name(f"{TRASH_PREFIX}{path.name}-{uuid.uuid4().hex[:8]}")
    try:
        os.replace(path, trash)
    except FileNotFoundError:
        return
    shutil.rmtree(trash, ignore_errors=True)
