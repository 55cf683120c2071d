"""Quotas per token: a token that floods the service gets 429 with ``Retry-After`` (too many
submissions a minute, too many unfinished jobs or pages) while the other token carries on;
a job that names too many documents is refused with 413 while it is planned (a 1,000,000-row
Parquet of 72 KB is not read to its end, nothing is left on disk); a job past its page
limit fails with ``page_limit``."""

from __future__ import annotations

import asyncio
import io
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ocrflow.config import RunConfig
from ocrflow.executors.local import TooManyDocuments, plan_run
from ocrflow.service.db import Database
from ocrflow.service.quotas import QuotaExceeded, Quotas, QuotaSettings
from tests.integration.serve_helpers import (
    EXAMPLES,
    TOKEN_A,
    TOKEN_B,
    auth,
    serving,
    wait_status,
)
from tests.security.access_helpers import born_digital_pdf

pytestmark = pytest.mark.slow
PDF = (EXAMPLES / "born-digital.pdf").read_bytes()


def post_pdf(client: httpx.Client, token: str, name: str = "a.pdf", data: bytes = PDF,
             options: str = "{}") -> httpx.Response:  # fmt: skip
    files = [("files", (name, data, "application/pdf"))]
    return client.post("/v1/jobs", files=files, data={"options": options}, headers=auth(token))


def assert_refused(response: httpx.Response, status: int = 429) -> dict[str, Any]:
    """The documented error shape, and for 429 a ``Retry-After`` in whole seconds."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"detail"} and isinstance(body["detail"], str), body
    if status == 429:
        assert 1 <= int(response.headers["retry-after"]) <= 60
    return body


def dataset(rows: int) -> bytes:
    """A Parquet file of ``rows`` rows, each the same tiny PNG (dictionary encoded: the
    file stays a few KB however many rows it has)."""
    png = (EXAMPLES / "rotated-page.png").read_bytes()[:64]  # bytes only; never opened
    table = pa.table({"image": pa.array([png] * rows, pa.binary())})
    sink = io.BytesIO()
    pq.write_table(table, sink, use_dictionary=True, compression="zstd")
    return sink.getvalue()


def job_folders(root: Path) -> list[Path]:
    return [p for p in (root / "jobs").iterdir() if p.is_dir()]


def test_submissions_per_minute(tmp_path: Path) -> None:
    root = tmp_path / "root"
    with (
        serving(root, "--workers", "0", "--max-submissions-per-minute", "5") as served,
        httpx.Client(base_url=served.url, timeout=30) as client,
    ):
        for _ in range(5):
            assert post_pdf(client, TOKEN_A).status_code == 201
        refused = post_pdf(client, TOKEN_A)
        assert "a minute" in assert_refused(refused)["detail"]
        # A JSON body is counted the same way, and refused before it is read.
        assert_refused(client.post("/v1/jobs", json={"uris": []}, headers=auth(TOKEN_A)))
        # The other token is not slowed down by the first one's flood.
        assert post_pdf(client, TOKEN_B).status_code == 201
    assert len(job_folders(root)) == 6


def test_unfinished_jobs_per_token_even_when_submitted_at_once(tmp_path: Path) -> None:
    root = tmp_path / "root"
    args = ("--workers", "0", "--max-queued-jobs", "4", "--max-submissions-per-minute", "0")
    with serving(root, *args) as served, httpx.Client(base_url=served.url, timeout=60) as client:
        # 20 submissions at once: the count and the reservation are one step, so no more
        # than the limit get in, however the requests interleave.
        with ThreadPoolExecutor(10) as threads:
            answers = list(threads.map(lambda _: post_pdf(client, TOKEN_A), range(20)))
        codes = sorted(a.status_code for a in answers)
        assert codes.count(201) == 4 and codes.count(429) == 16, codes
        for refused in (a for a in answers if a.status_code == 429):
            assert "unfinished jobs" in assert_refused(refused)["detail"]
        assert post_pdf(client, TOKEN_B).status_code == 201
        # A finished (here: cancelled) job frees its place.
        first = next(a.json()["id"] for a in answers if a.status_code == 201)
        cancel = client.post(f"/v1/jobs/{first}/cancel", headers=auth(TOKEN_A))
        assert cancel.status_code == 200 and cancel.json()["status"] == "cancelled"
        assert post_pdf(client, TOKEN_A).status_code == 201
        assert_refused(post_pdf(client, TOKEN_A))
    assert len(job_folders(root)) == 6


def test_unfinished_pages_per_token(tmp_path: Path) -> None:
    root = tmp_path / "root"
    three = [("files", (f"{n}.pdf", PDF, "application/pdf")) for n in "abc"]
    with (
        serving(root, "--workers", "0", "--max-pages-per-token", "5") as served,
        httpx.Client(base_url=served.url, timeout=30) as client,
    ):
        for _ in range(2):  # 3 documents not opened yet: at least 3 pages each time
            job = client.post("/v1/jobs", files=three, headers=auth(TOKEN_A))
            assert job.status_code == 201, job.text
            deadline = time.monotonic() + 20
            while client.get(f"/v1/jobs/{job.json()['id']}", headers=auth(TOKEN_A)).json()[
                "documents"
            ] != {"queued": 3}:
                assert time.monotonic() < deadline
                time.sleep(0.2)
        assert "unfinished pages" in assert_refused(post_pdf(client, TOKEN_A))["detail"]
        assert post_pdf(client, TOKEN_B).status_code == 201


@pytest.mark.parametrize("rows", [20_000, 1_000_000])
def test_a_dataset_of_too_many_rows_is_refused_while_planned(tmp_path: Path, rows: int) -> None:
    data = dataset(rows)
    assert len(data) < 100_000  # the attack: a tiny upload, a huge job
    root = tmp_path / "root"
    with serving(root, "--workers", "0") as served, httpx.Client(
        base_url=served.url, timeout=120
    ) as client:  # fmt: skip
        started = time.monotonic()
        files = [("files", ("rows.parquet", data, "application/octet-stream"))]
        answer = client.post("/v1/jobs", files=files, headers=auth(TOKEN_A))
        elapsed = time.monotonic() - started
        assert "more than 1000 documents" in assert_refused(answer, 413)["detail"]
        # Planning stopped past the cap: reading a million rows takes far longer.
        assert elapsed < 20, elapsed
        assert job_folders(root) == []  # nothing written for a refused job
        assert client.get("/v1/jobs", headers=auth(TOKEN_A)).json()["jobs"] == []
        # Under the cap a dataset is a job as before.
        small = [("files", ("rows.parquet", dataset(10), "application/octet-stream"))]
        assert client.post("/v1/jobs", files=small, headers=auth(TOKEN_A)).status_code == 201


def test_documents_per_job_counts_files_too(tmp_path: Path) -> None:
    root = tmp_path / "root"
    with serving(root, "--workers", "0", "--max-documents-per-job", "2") as served:
        files = [("files", (f"{n}.pdf", PDF, "application/pdf")) for n in "abc"]
        answer = httpx.post(served.url + "/v1/jobs", files=files, headers=auth(TOKEN_A),
                            timeout=30)  # fmt: skip
        assert_refused(answer, 413)
        assert job_folders(root) == []


def test_a_job_past_its_page_limit_fails(tmp_path: Path) -> None:
    root = tmp_path / "root"
    with (
        serving(root, "--workers", "1", "--max-pages-per-job", "5") as served,
        httpx.Client(base_url=served.url, timeout=30) as client,
    ):
        big = post_pdf(client, TOKEN_A, "big.pdf", born_digital_pdf(12)).json()["id"]
        small = post_pdf(client, TOKEN_A, "small.pdf", born_digital_pdf(4)).json()["id"]
        job = wait_status(client, big, {"done", "failed"}, timeout=120)
        assert job["status"] == "failed", job
        assert job["documents"] == {"failed": 1}, job
        [failure] = job["failures"]
        assert failure["reason"] == "page_limit" and failure["source"] == "big.pdf"
        assert "more than 5 pages" in failure["message"]
        # The job under its limit is converted as before.
        done = wait_status(client, small, {"done", "failed"}, timeout=120)
        assert done["status"] == "done" and done["pages"] == {"done": 4, "total": 4}, done
    # The big job's pages were not converted (its workers stopped it when it was opened).
    assert not list((root / "jobs" / big / "out" / "results").glob("*.jsonl"))


def test_quotas_unit_rate_window_and_backlog(tmp_path: Path) -> None:
    """The admission rules without a server: the window slides, limits of 0 are off."""
    database = Database(f"sqlite:///{tmp_path / 'q.db'}")
    database.migrate()

    async def scenario() -> None:
        quotas = Quotas(database, QuotaSettings(max_submissions_per_minute=2))
        for _ in range(2):
            async with quotas.admitted("a"):
                pass
        with pytest.raises(QuotaExceeded) as refused:
            async with quotas.admitted("a"):
                pass
        assert 1 <= refused.value.retry_after_s <= 60
        # Submissions older than a minute leave the window.
        quotas._submitted["a"] = type(quotas._submitted["a"])(
            t - 61 for t in quotas._submitted["a"]
        )
        async with quotas.admitted("a"):
            pass
        # A place held while a job is being created counts as an unfinished job.
        held = Quotas(database, QuotaSettings(max_queued_jobs=1, max_submissions_per_minute=0))
        async with held.admitted("b"):
            with pytest.raises(QuotaExceeded):
                async with held.admitted("b"):
                    pass
        async with held.admitted("b"):
            pass

    asyncio.run(scenario())
    database.close()


def test_planning_stops_right_past_the_cap(tmp_path: Path) -> None:
    """The planner asks the expansion for one source more than it allows, then refuses:
    the rest of the inputs is never read and the output is never written."""
    folder = tmp_path / "in"
    folder.mkdir()
    for name in "abc":
        (folder / f"{name}.pdf").write_bytes(PDF)
    out = tmp_path / "out"
    config = RunConfig(inputs=(str(folder),), output=str(out))
    with pytest.raises(TooManyDocuments) as refused:
        plan_run(config, max_documents=2)
    assert refused.value.limit == 2
    assert not out.exists()
    _, count = plan_run(config, max_documents=3)
    assert count == 3
