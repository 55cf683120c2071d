"""The render pool starts its workers in the background (its fork server imports the program
once): jobs sent meanwhile wait for them, and a pool closed while starting stops cleanly."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
from PIL import Image

from ocrflow.render.jobs import PageJob, ProbeJob, RenderSpec
from ocrflow.render.pool import RenderPool


def _pdf(path: Path, pages: int) -> Path:
    images = [Image.new("RGB", (200, 300), "white") for _ in range(pages)]
    images[0].save(path, "PDF", resolution=72, save_all=True, append_images=images[1:])
    return path


def _workers(pool: RenderPool) -> list[int]:
    return [p.pid for p in pool._pool._pool_manager.worker_manager.workers.values()]


def _gone(pids: list[int], deadline_s: float = 10.0) -> bool:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if not any(psutil.pid_exists(p) and psutil.Process(p).status() != "zombie" for p in pids):
            return True
        time.sleep(0.05)
    return False


def test_jobs_sent_at_once_wait_for_the_workers(tmp_path: Path) -> None:
    pdf = str(_pdf(tmp_path / "three.pdf", 3))

    async def scenario() -> tuple[int, int, list[int]]:
        pool = RenderPool(2, page_timeout_s=30, memory_mb=2048)
        try:  # no await before these: the workers may not exist yet
            probe = await pool.probe(ProbeJob(pdf, "pdf"))
            spec = RenderSpec(target_dim=300, text_layer="off", encoding="png")
            pages = await pool.render(PageJob(pdf, "pdf", (1, 2, 3), spec))
            workers = _workers(pool)
        finally:
            await asyncio.to_thread(pool.close)
        done = [p for p in pages if p.error is None and (p.blank or p.image is not None)]
        return probe.page_count, len(done), workers

    pages, rendered, workers = asyncio.run(scenario())
    assert pages == 3 and rendered == 3
    assert len(workers) == 2 and _gone(workers)


def test_a_pool_closed_while_it_starts_stops_cleanly() -> None:
    started = time.monotonic()
    pool = RenderPool(2, page_timeout_s=30, memory_mb=2048)
    pool.close()  # at once: its start may still be running in its thread
    assert time.monotonic() - started < 30
    assert _gone(_workers(pool))


#: A program that sends the fork server a Ctrl-C the moment it exists, while it imports
#: the render modules (as a terminal does to the whole process group when a user presses
#: Ctrl-C in a run's first second), then renders with the pool.
_CTRL_C_EARLY = textwrap.dedent(
    """
    import asyncio, os, signal, sys, time
    from multiprocessing import forkserver

    from ocrflow.render.jobs import ProbeJob
    from ocrflow.render.pool import RenderPool

    async def main() -> None:
        pool = RenderPool(1, page_timeout_s=30, memory_mb=2048)
        server = forkserver._forkserver
        end = time.monotonic() + 30
        while server._forkserver_pid is None and time.monotonic() < end:
            time.sleep(0.001)
        os.kill(server._forkserver_pid, signal.SIGINT)
        probe = await pool.probe(ProbeJob(sys.argv[1], "pdf"))
        await asyncio.to_thread(pool.close)
        print("pages", probe.page_count)

    if __name__ == "__main__":
        asyncio.run(main())
    """
)


def test_a_ctrl_c_while_the_fork_server_imports_leaves_no_traceback(tmp_path: Path) -> None:
    pdf = _pdf(tmp_path / "two.pdf", 2)
    program = tmp_path / "early_ctrl_c.py"
    program.write_text(_CTRL_C_EARLY)
    done = subprocess.run(
        [sys.executable, str(program), str(pdf)], capture_output=True, text=True, timeout=120
    )
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 0 and done.stdout.split() == ["pages", "2"], done.stderr
