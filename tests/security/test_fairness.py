"""Fairness between tokens: token A floods the queue with 40 multi-page jobs, then token B
submits a one-page job; the scheduler takes turns between tokens (then between a token's
jobs), so B's job is done within a bound and long before A's backlog, not after it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.fakevllm.process import ServerHandle, running_server
from tests.integration.serve_helpers import (
    TOKEN_A,
    TOKEN_B,
    auth,
    serving,
    wait_status,
)
from tests.security.access_helpers import born_digital_pdf

pytestmark = pytest.mark.slow
MODEL = "olmocr"
A_JOBS = 40
A_PAGES = 4


@pytest.fixture(scope="module")
def engine() -> Iterator[ServerHandle]:
    """A fake vLLM that reads about 8 pages a second: A's backlog lasts ~20 s."""
    flags = ("--reply-format", "olmocr", "--model", MODEL, "--pages-per-s", "8",
             "--max-num-seqs", "4")  # fmt: skip
    with running_server(*flags) as server:
        yield server


def submit(client: httpx.Client, token: str, data: bytes) -> str:
    files = [("files", ("doc.pdf", data, "application/pdf"))]
    options = {"options": '{"text_layer": "off"}'}  # every page goes to the engine
    answer = client.post("/v1/jobs", files=files, data=options, headers=auth(token))
    assert answer.status_code == 201, answer.text
    return str(answer.json()["id"])


def done_jobs(client: httpx.Client, token: str) -> int:
    jobs = client.get("/v1/jobs", params={"limit": 500}, headers=auth(token)).json()["jobs"]
    return sum(j["status"] == "done" for j in jobs)


def test_a_flooding_token_does_not_starve_another(engine: ServerHandle, tmp_path: Path) -> None:
    root = tmp_path / "root"
    args = ("--engine", "openai", "--server", engine.base_url, "--model", MODEL,
            "--recipe", "olmocr", "--workers", "1", "-q")  # fmt: skip
    with serving(root, *args) as served, httpx.Client(base_url=served.url, timeout=30) as client:
        flood = born_digital_pdf(A_PAGES)
        a_jobs = [submit(client, TOKEN_A, flood) for _ in range(A_JOBS)]
        started = time.monotonic()
        b_job = submit(client, TOKEN_B, born_digital_pdf(1))
        job = wait_status(client, b_job, {"done", "failed"}, token=TOKEN_B, timeout=60)
        waited = time.monotonic() - started
        a_done = done_jobs(client, TOKEN_A)
        assert job["status"] == "done" and job["pages"] == {"done": 1, "total": 1}, job
        # B waited about one slice of A's work, not A's backlog (~20 s of pages).
        assert a_done < A_JOBS // 2, (a_done, waited)
        assert waited < 60
        # A's jobs still all finish (taking turns starves nobody, A included).
        for job_id in a_jobs[:3]:
            assert wait_status(client, job_id, {"done"}, timeout=120)["status"] == "done"
