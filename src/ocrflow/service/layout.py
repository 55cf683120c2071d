"""Where a job lives under the service root, and the few marker files workers share.

``ROOT/jobs/<id>/job.json`` (who asked for what, written once), ``in/`` (uploads),
``out/`` (the run's workspace), and markers: ``cancelled`` (stop working on it),
``deleted`` (its owner deleted it: nobody works on it, lists it or rebuilds it, and the
folder goes once no worker holds it), ``finished`` (every item done),
``counts/<hash>.json`` (pages of each opened document). The folders are the durable truth;
the database mirrors them.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
import uuid
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

JOB_ID = re.compile(r"^[0-9a-f]{32}$")
#: Marker of a job its owner deleted (``DELETE /v1/jobs/{id}``); see ``deletion``.
DELETED = "deleted"


class JobMeta(BaseModel):
    """What a job was asked to do, by whom; written once when the job is created."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    id: str
    #: The SHA-256 of the owner's token ("" when the service runs without tokens).
    owner: str = ""
    created: float = Field(default_factory=time.time)
    idempotency_key: str | None = None
    callback_url: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    uris: tuple[str, ...] = ()


def new_job_id() -> str:
    """A random, unguessable job id (128 bits, hex)."""
    return uuid.uuid4().hex


class JobDir:
    """The paths of one job's folder."""

    def __init__(self, root: str | os.PathLike[str], job_id: str) -> None:
        if not JOB_ID.match(job_id):
            raise ValueError(f"not a job id: {job_id!r}")
        self.id = job_id
        self.path = Path(root, "jobs", job_id)

    @property
    def inputs(self) -> Path:
        return self.path / "in"

    @property
    def out(self) -> Path:
        return self.path / "out"

    @property
    def meta_path(self) -> Path:
        return self.path / "job.json"

    def write_meta(self, meta: JobMeta) -> None:
        """Write ``job.json`` atomically (a reader never sees half of it)."""
        _atomic_write(self.meta_path, meta.model_dump_json().encode())

    def read_meta(self) -> JobMeta | None:
        """``job.json``, or ``None`` for a folder whose creation did not finish."""
        try:
            return JobMeta.model_validate_json(self.meta_path.read_bytes())
        except (OSError, ValueError):
            return None

    # -- markers ----------------------------------------------------------------------
    def mark(self, name: str) -> None:
        """Create marker ``name`` (``cancelled``, ``deleted`` or ``finished``)."""
        _atomic_write(self.path / name, str(time.time()).encode())

    def marked(self, name: str) -> float | None:
        """When marker ``name`` was set, or ``None``."""
        try:
            return float((self.path / name).read_text() or 0)
        except (OSError, ValueError):
            return None

    def record_pages(self, source_uri: str, pages: int) -> None:
        """Remember how many pages an opened document has selected (for ``pages.total``)."""
        name = hashlib.sha256(source_uri.encode()).hexdigest()[:24]
        blob = json.dumps({"source": source_uri, "pages": pages}).encode()
        _atomic_write(self.path / "counts" / f"{name}.json", blob)

    def page_counts(self) -> dict[str, int]:
        """``{source uri: selected pages}`` for every document opened so far."""
        found: dict[str, int] = {}
        for path in (self.path / "counts").glob("*.json"):
            try:
                data = json.loads(path.read_bytes())
            except (OSError, ValueError):
                continue
            found[str(data["source"])] = int(data["pages"])
        return found


def job_ids(root: str | os.PathLike[str]) -> list[str]:
    """Ids of every job folder under ``root`` that has its ``job.json`` and is not marked
    ``deleted`` (a deleted job is nobody's work and no row to rebuild)."""
    return [
        p.name for p in _job_folders(root)
        if (p / "job.json").is_file() and not (p / DELETED).exists()
    ]  # fmt: skip


def deleted_job_ids(root: str | os.PathLike[str]) -> list[str]:
    """Ids of the job folders under ``root`` marked ``deleted`` (still to be purged)."""
    return [p.name for p in _job_folders(root) if (p / DELETED).exists()]


def _job_folders(root: str | os.PathLike[str]) -> list[Path]:
    folder = Path(root, "jobs")
    if not folder.is_dir():
        return []
    return sorted((p for p in folder.iterdir() if JOB_ID.match(p.name)), key=lambda p: p.name)


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
