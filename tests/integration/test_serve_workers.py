"""The job service's workers: SIGKILL of the server mid-job then restart (every page once),
a lost database rebuilt from the job folders, fair share between a long and a short job,
cancellation, and ``ocrflow worker --root`` on the same root."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.fakevllm.process import ServerHandle, running_server

from .serve_engine import MODEL, engine_args, long_pdf
from .serve_helpers import (
    EXAMPLES,
    TOKEN_A,
    auth,
    serving,
    start_serve,
    submit_samples,
    wait_status,
)
from .vlm_helpers import page_texts

pytestmark = pytest.mark.slow


def _every_page_once(out: Path) -> dict[str, list[int]]:
    pages = {Path(s).name: [n for n, _ in texts] for s, texts in page_texts(out).items()}
    for name, numbers in pages.items():
        assert numbers == list(range(1, len(numbers) + 1)), (name, numbers)
    return pages


@pytest.fixture()
def slower_engine() -> Iterator[ServerHandle]:
    """2 pages a second, two at once: the 7 sample pages take seconds, so the job is seen
    running with some pages done even when a loaded machine answers the polls late."""
    flags = ("--reply-format", "olmocr", "--model", MODEL, "--pages-per-s", "2",
             "--max-num-seqs", "2")  # fmt: skip
    with running_server(*flags) as server:
        yield server


def test_sigkill_mid_job_then_restart(slower_engine: ServerHandle, tmp_path: Path) -> None:
    root = tmp_path / "root"
    args = engine_args(slower_engine, "--workers", "1")
    served = start_serve(root, *args)
    try:
        with httpx.Client(base_url=served.url, timeout=30) as client:
            job_id = submit_samples(client, options='{"text_layer": "off"}')
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                job = client.get(f"/v1/jobs/{job_id}", headers=auth(TOKEN_A)).json()
                if job["status"] == "running" and job["pages"]["done"] >= 1:
                    break
                time.sleep(0.05)
            assert job["status"] == "running" and job["pages"]["done"] < 7, job
    finally:
        served.kill()
    with serving(root, *args) as served, httpx.Client(base_url=served.url, timeout=30) as client:
        job = wait_status(client, job_id, {"done", "failed"})
        assert job["status"] == "done" and job["pages"] == {"done": 7, "total": 7}, job
    pages = _every_page_once(root / "jobs" / job_id / "out")
    assert len(pages) == 3 and sum(len(p) for p in pages.values()) == 7
    # The database is lost: the next start rebuilds the job from its folder.
    (root / "ocrflow.db").unlink()
    for extra in root.glob("ocrflow.db-*"):
        extra.unlink()
    with serving(root, *args) as served, httpx.Client(base_url=served.url, timeout=30) as client:
        job = wait_status(client, job_id, {"done"}, timeout=20)
        assert job["pages"] == {"done": 7, "total": 7} and job["documents"] == {"ok": 3}


def test_fair_share_and_cancel(slow_engine: ServerHandle, tmp_path: Path) -> None:
    # 60 pages at 6 a second: 10 s of engine time, a wide margin for the short job's 3
    # pages even while other tests load the machine (24 pages, 4 s, once was not).
    big = long_pdf(tmp_path / "long.pdf", 60)
    root = tmp_path / "root"
    args = engine_args(slow_engine, "--workers", "1", "--split-pages", "3")
    with serving(root, *args) as served, httpx.Client(base_url=served.url, timeout=30) as client:
        options = {"options": '{"text_layer": "off"}'}
        long_id = client.post("/v1/jobs", files=[("files", ("long.pdf", big.read_bytes()))],
                              data=options, headers=auth(TOKEN_A)).json()["id"]  # fmt: skip
        wait_status(client, long_id, {"running"})
        short = [("files", ("short.pdf", (EXAMPLES / "born-digital.pdf").read_bytes()))]
        short_id = client.post("/v1/jobs", files=short, data=options,
                               headers=auth(TOKEN_A)).json()["id"]  # fmt: skip
        done = wait_status(client, short_id, {"done"}, timeout=30)
        running = client.get(f"/v1/jobs/{long_id}", headers=auth(TOKEN_A)).json()
        # The short job finished while the 60-page one, submitted first, was still at work.
        assert running["status"] == "running", (done, running)
        assert running["pages"]["done"] < 60
        cancelled = client.post(f"/v1/jobs/{long_id}/cancel", headers=auth(TOKEN_A)).json()
        assert cancelled["status"] == "cancelled"
        time.sleep(1.5)
        after = client.get(f"/v1/jobs/{long_id}", headers=auth(TOKEN_A)).json()
        assert after["status"] == "cancelled"
    out = root / "jobs" / long_id / "out"
    leases = list((out / ".ocrflow" / "leases").glob("*.json"))
    assert leases == []  # its workers let go of it
    assert (root / "jobs" / long_id / "cancelled").is_file()


def test_remote_worker_on_the_same_root(slow_engine: ServerHandle, tmp_path: Path) -> None:
    root = tmp_path / "root"
    with (
        serving(root, *engine_args(slow_engine, "--workers", "0")) as served,
        httpx.Client(base_url=served.url, timeout=30) as client,
    ):
        job_id = submit_samples(client)
        time.sleep(1.0)
        assert client.get(f"/v1/jobs/{job_id}", headers=auth(TOKEN_A)).json()["status"] == "queued"
        worker = subprocess.run(
            [sys.executable, "-m", "ocrflow.cli", "worker", "--root", str(root),
             "--server", slow_engine.base_url, "--exit-when-idle", "-q"],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert worker.returncode == 0, worker.stderr
        job = wait_status(client, job_id, {"done"}, timeout=20)
        assert job["pages"]["done"] == job["pages"]["total"] > 0
    _every_page_once(root / "jobs" / job_id / "out")
