"""An engine that cannot be opened: the job is retried after growing pauses, a bounded
number of times, then fails with ``engine_error`` and a cause that names no internal
address; one log line an attempt, no tracebacks. Other jobs and the API carry on."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ocrflow.config import RunConfig
from ocrflow.errors import EngineUnreachable, ModelNotServed
from ocrflow.executors.local import plan_run
from ocrflow.service.layout import JobDir, JobMeta, new_job_id
from ocrflow.service.options import JobOptions, job_config
from ocrflow.service.resources import MAX_START_DELAY_S, StartRetries, start_failure_message
from ocrflow.service.scheduler import Scheduler, SchedulerSettings
from tests.fakevllm.process import ServerHandle, running_server
from tests.integration.serve_helpers import (
    EXAMPLES,
    TOKEN_A,
    TOKEN_B,
    auth,
    free_port,
    serving,
    submit_samples,
    wait_status,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def other_model() -> Iterator[ServerHandle]:
    """A server that answers but serves another model than the service asks for."""
    with running_server("--reply-format", "olmocr", "--model", "some-other-model") as server:
        yield server


def attempt_lines(log: str, job_id: str) -> list[str]:
    return [line for line in log.splitlines() if job_id in line and "could not be opened" in line]


def test_an_unreachable_server_fails_the_job_after_a_few_attempts(tmp_path: Path) -> None:
    closed = f"http://127.0.0.1:{free_port()}/v1"
    args = ("--engine", "openai", "--server", closed, "--model", "olmocr", "--recipe", "olmocr",
            "--unreachable-timeout", "1", "--engine-start-attempts", "3",
            "--engine-start-backoff", "1")  # fmt: skip
    with (
        serving(tmp_path / "root", *args) as served,
        httpx.Client(base_url=served.url, timeout=30) as client,
    ):
        started = time.monotonic()
        job_id = submit_samples(client, options='{"text_layer": "off"}')
        job = wait_status(client, job_id, {"failed", "done"}, timeout=90)
        elapsed = time.monotonic() - started
        assert job["status"] == "failed", job
        assert job["documents"] == {"failed": 3}, job
        reasons = {(f["reason"], f["status"]) for f in job["failures"]}
        assert reasons == {("engine_error", "failed")}
        message = job["failures"][0]["message"]
        assert "could not be opened (3 attempts)" in message and "EngineUnreachable" in message
        assert "127.0.0.1" not in message  # the server's address is the operator's business
        # Three attempts with pauses of 1 s and 2 s between them (each waits ~1 s).
        assert 3 <= elapsed < 60, elapsed
        # The API still answers, and another token's job is refused nothing.
        assert client.get("/v1/jobs", headers=auth(TOKEN_B)).status_code == 200
        time.sleep(2)  # no attempt after the last one
        log = served.log()
    lines = attempt_lines(log, job_id)
    assert len(lines) == 3, lines
    assert "attempt 1 of 3" in lines[0] and "failed" in lines[-1]
    assert "Traceback" not in log


def test_default_backoff_is_bounded(other_model: ServerHandle, tmp_path: Path) -> None:
    """With the default flags a job whose server serves another model fails in about
    half a minute (5 attempts, pauses of 2, 4, 8 and 16 s), not never."""
    args = ("--engine", "openai", "--server", other_model.base_url, "--model", "olmocr",
            "--recipe", "olmocr")  # fmt: skip
    with (
        serving(tmp_path / "root", *args) as served,
        httpx.Client(base_url=served.url, timeout=30) as client,
    ):
        job_id = submit_samples(client, TOKEN_A, options='{"text_layer": "off"}')
        job = wait_status(client, job_id, {"failed", "done"}, timeout=120)
        assert job["status"] == "failed", job
        assert {f["reason"] for f in job["failures"]} == {"engine_error"}
        assert "ModelNotServed" in job["failures"][0]["message"]
        log = served.log()
    assert len(attempt_lines(log, job_id)) == 5
    assert "Traceback" not in log


def test_start_retries_policy() -> None:
    retries = StartRetries(attempts=4, first_delay_s=10.0)
    assert retries.failed("j", now=0.0) == (1, 10.0)
    assert retries.waiting("j", 5.0) and not retries.waiting("j", 10.0)
    assert retries.failed("j", now=10.0) == (2, 20.0)
    assert retries.failed("j", now=30.0) == (3, MAX_START_DELAY_S)  # 40 s, capped
    assert retries.failed("j", now=60.0) == (4, None)  # no attempt left: the job fails
    assert not retries
    # An engine that opened wipes the slate; jobs no longer runnable are forgotten.
    retries.failed("k", now=0.0)
    retries.succeeded("k")
    assert retries.failed("k", now=0.0) == (1, 10.0)
    retries.keep_only(set())
    assert not retries


def test_failure_message_names_no_address() -> None:
    cause = EngineUnreachable("no server at http://10.0.0.7:8000/v1 answered for 60 s")
    message = start_failure_message(cause, 5)
    assert "10.0.0.7" not in message
    assert message.endswith("no OCR server could be reached (EngineUnreachable)")
    assert "does not serve the model" in start_failure_message(ModelNotServed("x"), 1)


def test_a_job_whose_slices_keep_failing_is_paused_not_spun(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Any other trouble (here a job folder whose recorded run is broken) pauses the job
    with the same growing backoff: one traceback, then one line a failure; not a
    traceback every poll (the job may come right, so it is not failed)."""
    root = tmp_path / "root"
    (root / "jobs").mkdir(parents=True)
    job = JobDir(root, new_job_id())
    sample = str(EXAMPLES / "born-digital.pdf")
    plan_run(job_config(RunConfig(inputs=(), output=str(root)), JobOptions(), [sample],
                        str(job.out)))  # fmt: skip
    (job.out / ".ocrflow" / "config.json").write_text('{"fingerprint": "broken"}')
    job.write_meta(JobMeta(id=job.id, uris=(sample,)))
    settings = SchedulerSettings(root=root, poll_s=0.05, engine_backoff_s=1.0)

    async def run_for(seconds: float) -> None:
        task = asyncio.ensure_future(Scheduler(settings).run())
        await asyncio.sleep(seconds)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    with caplog.at_level(logging.WARNING, logger="ocrflow.service"):
        asyncio.run(run_for(4.0))
    failures = [r for r in caplog.records if job.id in r.getMessage()]
    # Pauses of 1, 2, 4 s: three or four slices in 4 s, where a poll of 0.05 s made ~80.
    assert 2 <= len(failures) <= 4, [r.getMessage() for r in failures]
    assert failures[0].exc_info is not None
    assert all(r.exc_info is None for r in failures[1:])
    assert "failed again" in failures[-1].getMessage()
    assert not (job.path / "failed.json").exists()
