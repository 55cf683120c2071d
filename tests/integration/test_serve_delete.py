"""Cancelling and deleting jobs of the job service: ``POST /v1/jobs/{id}/cancel`` stops the
work and keeps what is finished readable; ``DELETE /v1/jobs/{id}`` stops it too, then every
read answers 404, the quota place is free, the folder goes once the workers let go of it,
and neither a restart nor a database rebuilt from the folders brings the job back."""

from __future__ import annotations

import io
import json
import time
import zipfile
from pathlib import Path

import httpx
import pytest

from ocrflow.config import RunConfig
from ocrflow.service.db import Database
from ocrflow.service.deletion import purge_deleted
from ocrflow.service.jobs import JobStore, ServiceSettings
from ocrflow.service.layout import JobDir, JobMeta, job_ids, new_job_id
from ocrflow.storage.open import open_store
from ocrflow.workspace.leases import LeaseManager
from tests.fakevllm.process import ServerHandle

from .serve_engine import engine_args, long_pdf
from .serve_helpers import (
    EXAMPLES,
    TOKEN_A,
    TOKEN_B,
    auth,
    serving,
    start_serve,
    submit_samples,
    wait_status,
)

H = auth(TOKEN_A)


def post(client: httpx.Client, name: str, data: bytes) -> httpx.Response:
    files = [("files", (name, data, "application/pdf"))]
    return client.post("/v1/jobs", files=files, data={"options": '{"text_layer": "off"}'},
                       headers=H)  # fmt: skip


def leases(root: Path, job_id: str) -> list[Path]:
    return list((root / "jobs" / job_id / "out" / ".ocrflow" / "leases").glob("*.json"))


def _client(url: str) -> httpx.Client:
    return httpx.Client(base_url=url, timeout=30)


def wait_for(check: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise AssertionError(f"{what}: not within {timeout} s")


def assert_gone(client: httpx.Client, job_id: str) -> None:
    """Every read of the job, and every change, answers 404 in the one error shape."""
    base = f"/v1/jobs/{job_id}"
    for method, path in [("GET", ""), ("GET", "/results"), ("GET", "/results?format=markdown"),
                         ("GET", "/documents"), ("POST", "/cancel"), ("DELETE", "")]:  # fmt: skip
        answer = client.request(method, base + path, headers=H)
        assert answer.status_code == 404, (method, path, answer.text)
        assert answer.json() == {"detail": "no such job"}
    assert job_id not in [j["id"] for j in client.get("/v1/jobs", headers=H).json()["jobs"]]


@pytest.mark.slow
def test_delete_a_running_job(slow_engine: ServerHandle, tmp_path: Path) -> None:
    root = tmp_path / "root"
    big = long_pdf(tmp_path / "long.pdf", 24).read_bytes()
    args = engine_args(slow_engine, "--workers", "1", "--split-pages", "3",
                       "--max-queued-jobs", "1")  # fmt: skip
    with serving(root, *args) as served, httpx.Client(base_url=served.url, timeout=30) as client:
        job_id = post(client, "long.pdf", big).json()["id"]
        wait_for(lambda: client.get(f"/v1/jobs/{job_id}", headers=H).json()["pages"]["done"] >= 1
                 and leases(root, job_id), 30, "the job at work")  # fmt: skip
        assert post(client, "short.pdf", big).status_code == 429  # one unfinished job at most
        assert client.delete(f"/v1/jobs/{job_id}", headers=auth(TOKEN_B)).status_code == 404
        deleted = client.delete(f"/v1/jobs/{job_id}", headers=H)
        assert deleted.status_code == 200, deleted.text
        body = deleted.json()
        assert body["id"] == job_id and body["status"] == "deleted"
        assert 1 <= body["pages"]["done"] < 24 and body["finished"] is not None
        # Gone for the API at once; the folder stays while the worker still holds it.
        folder = root / "jobs" / job_id
        assert (folder / "deleted").is_file() and (folder / "job.json").is_file()
        assert_gone(client, job_id)
        # Its quota place is free: the next job is taken, and the slot moves on to it.
        short = post(client, "short.pdf", (EXAMPLES / "born-digital.pdf").read_bytes())
        assert short.status_code == 201, short.text
        short_id = short.json()["id"]
        wait_for(lambda: not leases(root, job_id), 5, "its workers let go")
        wait_for(lambda: not folder.exists(), 20, "its folder removed")
        assert wait_status(client, short_id, {"done"}, timeout=30)["pages"]["done"] >= 1
    assert sorted(p.name for p in (root / "jobs").iterdir()) == [short_id]
    # A restart, even with a database rebuilt from the folders, does not bring it back.
    (root / "ocrflow.db").unlink()
    for extra in root.glob("ocrflow.db-*"):
        extra.unlink()
    with serving(root, *args) as served, httpx.Client(base_url=served.url, timeout=30) as client:
        assert_gone(client, job_id)
        assert [j["id"] for j in client.get("/v1/jobs", headers=H).json()["jobs"]] == [short_id]


@pytest.mark.slow
def test_cancel_keeps_results_readable(slow_engine: ServerHandle, tmp_path: Path) -> None:
    root = tmp_path / "root"
    short = (EXAMPLES / "born-digital.pdf").read_bytes()
    files = [
        ("files", ("a-short.pdf", short, "application/pdf")),
        (
            "files",
            ("b-long.pdf", long_pdf(tmp_path / "long.pdf", 48).read_bytes(), "application/pdf"),
        ),
    ]
    # In ranges of 3 pages, 4 at once: the short document is among the first items.
    args = engine_args(slow_engine, "--workers", "1", "--max-queued-jobs", "1",
                       "--split-pages", "3")  # fmt: skip
    with serving(root, *args) as served, httpx.Client(base_url=served.url, timeout=30) as client:
        created = client.post("/v1/jobs", files=files, headers=H,
                              data={"options": '{"text_layer": "off"}'})  # fmt: skip
        job_id = created.json()["id"]
        wait_for(lambda: client.get(f"/v1/jobs/{job_id}", headers=H).json()["documents"]
                 .get("ok", 0) >= 1, 30, "a document finished")  # fmt: skip
        assert client.post(f"/v1/jobs/{job_id}/cancel", headers=auth(TOKEN_B)).status_code == 404
        cancelled = client.post(f"/v1/jobs/{job_id}/cancel", headers=H)
        assert cancelled.status_code == 200, cancelled.text
        assert cancelled.json()["status"] == "cancelled"
        wait_for(lambda: not leases(root, job_id), 5, "its workers let go")
        pages = checkpoints(root, job_id)
        time.sleep(1.5)
        assert checkpoints(root, job_id) == pages  # nothing converted since; nothing lost
        job = client.get(f"/v1/jobs/{job_id}", headers=H).json()
        assert job["status"] == "cancelled" and job["documents"]["ok"] == 1, job
        assert job["pages"]["done"] < job["pages"]["total"], job
        # What was finished stays readable: its record, its Markdown, the document view.
        results = client.get(f"/v1/jobs/{job_id}/results", headers=H)
        assert results.status_code == 200 and results.headers["x-job-status"] == "cancelled"
        records = [json.loads(line) for line in results.text.splitlines()]
        names = [Path(r["metadata"]["Source-File"]).name for r in records]
        assert names == ["a-short.pdf"], names
        assert records[0]["text"].strip()
        archive = client.get(f"/v1/jobs/{job_id}/results?format=markdown", headers=H)
        assert zipfile.ZipFile(io.BytesIO(archive.content)).namelist() == [f"{names[0]}.md"]
        listed = client.get(f"/v1/jobs/{job_id}/documents", headers=H).json()["documents"]
        assert [(d["name"], d["status"]) for d in listed] == [(names[0], "ok")]
        listing = client.get("/v1/jobs?status=cancelled", headers=H).json()["jobs"]
        assert [j["id"] for j in listing] == [job_id]
        # A cancelled job frees its quota place, and cancelling again changes nothing.
        assert post(client, "b.pdf", short).status_code == 201
        again = client.post(f"/v1/jobs/{job_id}/cancel", headers=H).json()
        assert again["status"] == "cancelled" and again["finished"] == job["finished"]
    assert (root / "jobs" / job_id / "cancelled").is_file()
    assert not (root / "jobs" / job_id / "deleted").exists()


def checkpoints(root: Path, job_id: str) -> dict[str, bytes]:
    """The job's page checkpoints (pages converted of documents not finished)."""
    folder = root / "jobs" / job_id / "out" / ".ocrflow" / "pages"
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*.json")}


@pytest.mark.slow
def test_a_deleted_job_is_not_rebuilt_after_a_crash(tmp_path: Path) -> None:
    root = tmp_path / "root"
    served = start_serve(root, "--workers", "0", "-q")
    try:
        with httpx.Client(base_url=served.url, timeout=30) as client:
            gone, kept = submit_samples(client), submit_samples(client)
            assert client.delete(f"/v1/jobs/{gone}", headers=H).json()["status"] == "deleted"
    finally:
        served.kill()  # SIGKILL before its folder was purged (5 s after the delete)
    assert (root / "jobs" / gone / "deleted").is_file()
    (root / "ocrflow.db").unlink()
    for extra in root.glob("ocrflow.db-*"):
        extra.unlink()
    with serving(root, "--workers", "0", "-q") as served, _client(served.url) as client:
        assert_gone(client, gone)
        assert client.get(f"/v1/jobs/{kept}", headers=H).json()["status"] == "queued"
        wait_for(lambda: not (root / "jobs" / gone).exists(), 20, "its folder removed")
    # A crash between the marker and the row: the row goes at the next start.
    (root / "jobs" / kept / "deleted").write_text(str(time.time()))
    with serving(root, "--workers", "0", "-q") as served, _client(served.url) as client:
        assert_gone(client, kept)


# -- the purge itself, without a server ---------------------------------------------------
def _deleted_job(root: Path, marked_at: float) -> JobDir:
    job = JobDir(root, new_job_id())
    (job.out / ".ocrflow").mkdir(parents=True)
    job.write_meta(JobMeta(id=job.id, owner="o"))
    (job.path / "deleted").write_text(str(marked_at))
    return job


def test_purge_waits_for_slots_leases_and_the_grace_time(tmp_path: Path) -> None:
    root = tmp_path / "root"
    database = Database(f"sqlite:///{tmp_path / 'jobs.db'}")
    database.migrate()
    try:
        old = time.time() - 60
        held, leased, fresh = (_deleted_job(root, old), _deleted_job(root, old),
                               _deleted_job(root, time.time()))  # fmt: skip
        manager = LeaseManager(open_store(str(leased.out)), "worker-1", ttl_s=60)
        lease = manager.claim("item-1")
        assert lease is not None
        live = JobDir(root, new_job_id())
        live.write_meta(JobMeta(id=live.id, owner="o"))
        assert job_ids(root) == [live.id]  # deleted jobs are nobody's work, no row to rebuild
        assert purge_deleted(database, root, busy={held.id}) == []
        assert held.path.is_dir() and leased.path.is_dir() and fresh.path.is_dir()
        manager.release(lease)
        assert purge_deleted(database, root, busy={held.id}) == [leased.id]
        assert purge_deleted(database, root) == [held.id]
        assert purge_deleted(database, root, grace_s=0) == [fresh.id]
        assert sorted(p.name for p in (root / "jobs").iterdir()) == [live.id]
        store = JobStore(database, ServiceSettings(
            root=root, base=RunConfig(inputs=(), output=str(tmp_path / "o"))
        ))  # fmt: skip
        assert store.rebuild() == 1 and store.get("o", live.id) is not None
        view = store.delete("o", live.id)
        assert view is not None and view["status"] == "deleted"
        assert store.get("o", live.id) is None and store.delete("o", live.id) is None
        assert store.rebuild() == 0 and live.path.is_dir()
    finally:
        database.close()
