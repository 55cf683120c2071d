"""The service's worker slots keep their render processes and share one opened engine from
job to job and slice to slice (each slice used to start both again), against the fake vLLM
server: every page still read once, one engine opened and closed, a failed opening retried,
a cancelled waiter leaving the opening to the others, idle engines beyond the cap closed."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pypdfium2 as pdfium
import pytest

from ocrflow.config import EngineOptions, RunConfig
from ocrflow.errors import EngineUnreachable
from ocrflow.executors.local import plan_run
from ocrflow.render.pool import RenderPool
from ocrflow.service import resources
from ocrflow.service.layout import JobDir, JobMeta, new_job_id
from ocrflow.service.options import JobOptions, job_config
from ocrflow.service.scheduler import Scheduler, SchedulerSettings
from ocrflow.storage.open import open_store
from ocrflow.workspace.state import Workspace
from tests.fakevllm.process import ServerHandle, running_server

from .serve_helpers import EXAMPLES

MODEL = "olmocr"
SAMPLE = EXAMPLES / "born-digital.pdf"


@pytest.fixture(scope="module")
def engine() -> Iterator[ServerHandle]:
    flags = ("--reply-format", "olmocr", "--model", MODEL, "--pages-per-s", "400")
    with running_server(*flags) as server:
        yield server


def engine_options(server: ServerHandle, **extra: Any) -> EngineOptions:
    return EngineOptions(
        kind="openai", model=MODEL, servers=(server.base_url,), recipe="olmocr", **extra
    )


class Counted:
    """Counts engines opened and closed, and render pools started, by the service."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.opened = 0
        self.closed = 0
        self.pools = 0
        real_open = resources.open_engine

        @contextlib.asynccontextmanager
        async def open_engine(options: EngineOptions, *, log_dir: str | None) -> AsyncIterator:
            self.opened += 1
            try:
                async with real_open(options, log_dir=log_dir) as session:
                    yield session
            finally:
                self.closed += 1

        counter = self

        class Pool(RenderPool):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                counter.pools += 1
                super().__init__(*args, **kwargs)

        monkeypatch.setattr(resources, "open_engine", open_engine)
        monkeypatch.setattr(resources, "RenderPool", Pool)


def make_job(root: Path, base: RunConfig) -> JobDir:
    """A job of the sample PDF planned into ``root`` as the API plans one."""
    job = JobDir(root, new_job_id())
    options = JobOptions.model_validate({"text_layer": "off"})
    plan_run(job_config(base, options, [str(SAMPLE)], str(job.out)))
    job.write_meta(JobMeta(id=job.id, uris=(str(SAMPLE),), options={"text_layer": "off"}))
    return job


def test_slots_reuse_pools_and_one_engine(
    engine: ServerHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counted = Counted(monkeypatch)
    root = tmp_path / "root"
    (root / "jobs").mkdir(parents=True)
    options = engine_options(engine)
    base = RunConfig(inputs=(), output=str(root), engine=options)
    jobs = [make_job(root, base) for _ in range(5)]
    before = sum(engine.stats()["outcomes"].values())
    settings = SchedulerSettings(
        root=root, slots=2, servers=options.servers, exit_when_idle=True, poll_s=0.1
    )
    asyncio.run(asyncio.wait_for(Scheduler(settings).run(), 120))

    pages = len(pdfium.PdfDocument(SAMPLE))
    for job in jobs:
        assert job.marked("finished"), job.id
        records = Workspace(open_store(str(job.out))).done_records()
        assert [len(r.pages) for r in records] == [pages]
    assert sum(engine.stats()["outcomes"].values()) - before == 5 * pages
    # Five jobs, at least five slices: one engine for all, opened once and closed at the end;
    # at most one render pool a slot.
    assert (counted.opened, counted.closed) == (1, 1)
    assert 1 <= counted.pools <= 2


def test_engine_cache_opens_once_and_retries_a_failed_opening(
    engine: ServerHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    counted = Counted(monkeypatch)

    async def scenario() -> None:
        cache = resources.EngineCache(keep_idle=1)
        options = engine_options(engine)

        async def use() -> Any:
            async with cache.session(options) as session:
                await asyncio.sleep(0.05)
                return session.engine

        # A waiter cancelled while the engine opens leaves the opening to the others.
        early = asyncio.ensure_future(use())
        await asyncio.sleep(0)
        early.cancel()
        first, second = await asyncio.gather(use(), use())
        assert first is second and counted.opened == 1
        assert early.cancelled()

        # Its server seen down while no slot used it: the next slice opens it again (and
        # waits for the server as a fresh slice would).
        for replica in first.replicas:
            replica.healthy = False
        assert await use() is not first
        await asyncio.sleep(0.1)
        assert (counted.opened, counted.closed) == (2, 1)

        # Another configuration: the first engine, idle, goes beyond keep_idle=1.
        async with cache.session(engine_options(engine, max_concurrency=3)):
            pass
        await asyncio.sleep(0.1)
        assert (counted.opened, counted.closed) == (3, 2)

        # An engine that cannot be reached fails each slice that waits, then is tried again.
        dead = EngineOptions(
            kind="openai", model=MODEL, servers=("http://127.0.0.1:9/v1",), recipe="olmocr",
            unreachable_timeout_s=0.3,
        )  # fmt: skip
        for _ in range(2):
            with pytest.raises(EngineUnreachable):
                async with cache.session(dead):
                    pass
        assert counted.opened == 5
        await cache.aclose()
        assert counted.closed == counted.opened

    asyncio.run(asyncio.wait_for(scenario(), 60))
