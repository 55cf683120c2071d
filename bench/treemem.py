"""Run a command and sample the summed RSS of its whole process tree (peak memory)."""

from __future__ import annotations

import contextlib
import subprocess
import threading
import time
from dataclasses import dataclass

import psutil


@dataclass
class TreeUsage:
    """What a command used: wall time, peak tree RSS, CPU seconds (user+sys, children too)."""

    returncode: int
    wall_s: float
    peak_rss_mb: float
    cpu_s: float
    stdout: str
    stderr: str


def _tree_rss(root: psutil.Process) -> int:
    total = 0
    try:
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            total += proc.memory_info().rss
    return total


def _tree_cpu(root: psutil.Process, seen: dict[int, float]) -> None:
    try:
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return
    for proc in procs:
        try:
            times = proc.cpu_times()
            seen[proc.pid] = times.user + times.system
        except psutil.Error:
            pass


def run_measured(
    cmd: list[str],
    *,
    timeout: float = 3600,
    interval: float = 0.05,
    env: dict[str, str] | None = None,
) -> TreeUsage:
    """Run ``cmd`` to completion, sampling memory and CPU of it and its descendants."""
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    root = psutil.Process(proc.pid)
    peak = 0
    cpu: dict[int, float] = {}
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, _tree_rss(root))
            _tree_cpu(root, cpu)
            stop.wait(interval)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        stop.set()
        sampler.join()
    wall = time.perf_counter() - started
    return TreeUsage(proc.returncode, wall, peak / 2**20, sum(cpu.values()), out, err)
