"""Jobs: create one (a planned run into its folder), look them up per owner, cancel or
delete them, and keep the database in step with the folders."""

from __future__ import annotations

import shutil
import time
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm.exc import StaleDataError

from ocrflow.config import RunConfig
from ocrflow.config.access import service_policy
from ocrflow.errors import OcrflowError
from ocrflow.executors.local import TooManyDocuments, plan_run

from .db import TERMINAL, Database, Job
from .deletion import purge_deleted
from .layout import DELETED, JobDir, JobMeta, job_ids
from .options import JobOptions, OptionError, job_config
from .progress import read_progress
from .quotas import JobTooLarge, QuotaSettings, write_job_limits


@dataclass(frozen=True)
class ServiceSettings:
    """What the API needs to know about its deployment."""

    root: Path
    base: RunConfig
    max_upload_bytes: int = 100 << 20
    allow_uri_prefixes: tuple[str, ...] = ()
    allow_callback_hosts: tuple[str, ...] = ()
    #: Models a job may choose besides the service's own (``ocrflow serve --allow-model``).
    allowed_models: tuple[str, ...] = ()
    #: Limits per token and per job (``ocrflow serve --max-…`` flags).
    quotas: QuotaSettings = field(default_factory=QuotaSettings)
    extra: dict[str, Any] = field(default_factory=dict)


def iso(ts: float | None) -> str | None:
    """An epoch time as ISO 8601 (UTC), or ``None``."""
    return datetime.fromtimestamp(ts, UTC).isoformat() if ts else None


def job_view(row: Job) -> dict[str, Any]:
    """The API's JSON form of a job."""
    return {
        "id": row.id,
        "status": row.status,
        "documents": row.documents,
        "pages": {"done": row.pages_done, "total": row.pages_total},
        "failures": row.failures,
        "options": row.options,
        "created": iso(row.created),
        "started": iso(row.started),
        "finished": iso(row.finished),
    }


class JobStore:
    """Jobs in the database and their folders under the root."""

    def __init__(self, db: Database, settings: ServiceSettings) -> None:
        self.db = db
        self.settings = settings

    # -- reading ----------------------------------------------------------------------
    def get(self, owner: str, job_id: str) -> Job | None:
        """The owner's job, or ``None`` (another owner's job is nobody's business)."""
        with self.db.session() as session:
            row = session.get(Job, job_id)
            return row if row is not None and row.owner == owner else None

    def by_key(self, owner: str, key: str) -> Job | None:
        """The owner's job created with this ``Idempotency-Key``."""
        with self.db.session() as session:
            query = select(Job).where(Job.owner == owner, Job.idempotency_key == key)
            return session.scalars(query).first()

    def page(self, owner: str, status: str | None, limit: int, offset: int) -> list[Job]:
        """The owner's jobs, newest first."""
        with self.db.session() as session:
            query = select(Job).where(Job.owner == owner)
            if status:
                query = query.where(Job.status == status)
            query = query.order_by(Job.created.desc(), Job.id).limit(limit).offset(offset)
            return list(session.scalars(query))

    # -- creating ---------------------------------------------------------------------
    def plan(self, job: JobDir, meta: JobMeta, options: JobOptions) -> RunConfig:
        """Plan the job's run into its folder (the folder is the job from now on)."""
        inputs = [str(job.inputs)] if job.inputs.is_dir() else []
        config = job_config(
            self.settings.base, options, [*inputs, *meta.uris], str(job.out),
            allowed_models=self.settings.allowed_models,
        )  # fmt: skip
        # Recorded with the run: every worker reads the job's sources and rows under it.
        access = service_policy(self.settings.allow_uri_prefixes, uploads=(str(job.inputs),))
        config = config.model_copy(
            update={"input": config.input.model_copy(update={"access": access})}
        )
        quotas = self.settings.quotas
        try:
            _, count = plan_run(config, max_documents=quotas.max_documents_per_job or None)
        except TooManyDocuments as exc:
            raise JobTooLarge(
                f"the job names more than {exc.limit} documents (this service's limit)"
            ) from None
        except OptionError:
            raise
        except OcrflowError as exc:
            raise OptionError(str(exc)) from None
        if count == 0:
            raise OptionError("the job names no document")
        write_job_limits(job.path, quotas)  # before job.json: workers see both or neither
        job.write_meta(meta)
        return config

    def insert(self, meta: JobMeta) -> Job:
        """Add the job's row; on an ``Idempotency-Key`` already used, the earlier job."""
        row = _row_from_meta(meta)
        try:
            with self.db.session() as session:
                session.add(row)
            return row
        except IntegrityError:
            earlier = self.by_key(meta.owner, meta.idempotency_key or "")
            if earlier is None:
                raise
            return earlier

    def discard(self, job: JobDir) -> None:
        """Remove a job folder that never became a job (refused upload, lost race)."""
        shutil.rmtree(job.path, ignore_errors=True)

    # -- changing ---------------------------------------------------------------------
    def cancel(self, owner: str, job_id: str) -> Job | None:
        """Cancel the owner's job: the marker stops its workers, the row says cancelled."""
        try:
            with self.db.session() as session:
                row = session.get(Job, job_id)
                if row is None or row.owner != owner:
                    return None
                if row.status not in TERMINAL:
                    JobDir(self.settings.root, job_id).mark("cancelled")
                    row.status, row.finished = "cancelled", time.time()
        except StaleDataError:  # deleted meanwhile (a DELETE at the same moment)
            return None
        return row

    def delete(self, owner: str, job_id: str) -> dict[str, Any] | None:
        """Delete the owner's job: cancelled if it still runs, marked ``deleted`` (workers
        let go of it, no rebuild brings it back), its row removed (every read is a 404,
        its quota place is free). The folder goes later (``purge``). Returns the job's
        last JSON, status ``deleted``; ``None`` if there is no such job of the owner."""
        job = JobDir(self.settings.root, job_id)
        with self.db.session() as session:
            row = session.get(Job, job_id)
            if row is None or row.owner != owner:
                return None
            if row.status not in TERMINAL:
                job.mark("cancelled")  # what workers of any version stop on
                row.finished = time.time()
            # The marker before the row: a crash in between leaves a marked folder, which
            # the next purge removes with its row, never a folder a rebuild would revive.
            job.mark(DELETED)
            view = job_view(row) | {"status": "deleted"}
            session.expunge(row)
            gone = session.execute(delete(Job).where(Job.id == job_id, Job.owner == owner))
            if not getattr(gone, "rowcount", 1):  # a concurrent DELETE won
                return None
        return view

    def purge(self, busy: Collection[str] = ()) -> list[str]:
        """Remove the folders of deleted jobs no worker holds (``busy``: this process's
        slots' jobs); see ``deletion.purge_deleted``."""
        return purge_deleted(self.db, self.settings.root, busy)

    def rebuild(self) -> int:
        """Add a row for every job folder the database lacks (a lost or new database);
        deleted jobs are not among them (``job_ids``)."""
        with self.db.session() as session:
            known = set(session.scalars(select(Job.id)))
        added = 0
        for job_id in job_ids(self.settings.root):
            if job_id in known:
                continue
            job = JobDir(self.settings.root, job_id)
            meta = job.read_meta()
            if meta is None:
                continue
            row = _row_from_meta(meta)
            if job.marked("cancelled"):
                row.status = "cancelled"
            with self.db.session() as session:
                session.add(row)
            added += 1
        return added

    def sync(self) -> list[Job]:
        """Refresh every unfinished job's progress from its folder; return the jobs that
        reached a final state now (their callbacks are due)."""
        ended = []
        for job_id in self.db.active_ids():
            try:
                row = self._sync_one(job_id)
            except StaleDataError:  # deleted while it was read: nothing left to refresh
                continue
            if row is not None and row.status in TERMINAL:
                ended.append(row)
        return ended

    def _sync_one(self, job_id: str) -> Job | None:
        job = JobDir(self.settings.root, job_id)
        if not job.meta_path.is_file():
            return None
        progress = read_progress(job)
        with self.db.session() as session:
            row = session.get(Job, job_id)
            if row is None or row.status in TERMINAL:
                return None
            row.documents, row.failures = progress.documents, progress.failures
            row.pages_done, row.pages_total = progress.pages_done, progress.pages_total
            if row.started is None and (progress.active or progress.pages_done):
                row.started, row.status = time.time(), "running"
            if job.marked("cancelled"):
                row.status, row.finished = "cancelled", time.time()
            elif progress.complete:
                row.status = "failed" if progress.failed else "done"
                row.finished = time.time()
                row.started = row.started or row.finished
            return row

    def pending_callbacks(self) -> list[Job]:
        """Ended jobs whose callback has not gone out yet."""
        with self.db.session() as session:
            query = select(Job).where(Job.status.in_(TERMINAL), Job.callback_state == "pending")
            return list(session.scalars(query))

    def mark_callback(self, job_id: str, state: str) -> None:
        """Record how the job's callback went (``sent`` or ``failed``)."""
        with self.db.session() as session:
            row = session.get(Job, job_id)
            if row is not None:
                row.callback_state = state

    def result_files(self, job_id: str, folder: str, suffix: str) -> Iterator[Path]:
        """The job's output files under ``out/<folder>`` ending in ``suffix``, sorted."""
        base = JobDir(self.settings.root, job_id).out / folder
        return iter(sorted(p for p in base.rglob(f"*{suffix}") if p.is_file()))


def _row_from_meta(meta: JobMeta) -> Job:
    return Job(
        id=meta.id,
        owner=meta.owner,
        status="queued",
        idempotency_key=meta.idempotency_key,
        options=meta.options,
        callback_url=meta.callback_url,
        callback_state="pending" if meta.callback_url else "none",
        documents={},
        pages_done=0,
        pages_total=0,
        failures=[],
        created=meta.created,
    )
