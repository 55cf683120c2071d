"""Where a client's CPU goes while it runs: its process tree sampled by role.

``TreeCpu(pid)`` polls ``psutil`` every ``interval_s``: the root process (ocrflow's main
process: event loop, HTTP, JSON, base64, workspace and outputs) apart from its descendants
(the render pool: PDFium, resizing, PNG/JPEG), a managed vLLM below it left out. Per sample
it keeps the cores each role used since the last one, and the root's threads' CPU, so a run
can say which side is busy and whether one thread of the main process is saturated (the
event loop runs on one core whatever the machine has).
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

import psutil


def _cpu_s(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return times.user + times.system


@dataclass
class TreeCpu:
    """CPU seconds and cores used by a process tree, main process against its children."""

    pid: int
    interval_s: float = 0.5
    exclude: tuple[str, ...] = ("vllm",)
    series: list[tuple[float, float, float, int]] = field(default_factory=list)
    _last: dict[int, float] = field(default_factory=dict)
    _threads: dict[int, float] = field(default_factory=dict)
    _totals: dict[str, float] = field(default_factory=lambda: {"main": 0.0, "workers": 0.0})
    _skipped: set[int] = field(default_factory=set)
    _seen_workers: set[int] = field(default_factory=set)
    _t: float = 0.0

    def _sample(self) -> None:
        now = time.time()
        try:
            root = psutil.Process(self.pid)
            children = root.children(recursive=True)
        except psutil.Error:
            return
        used = {"main": 0.0, "workers": 0.0}
        workers = 0
        for proc in [root, *children]:
            if proc.pid in self._skipped:
                continue
            with contextlib.suppress(psutil.Error):
                command = " ".join(proc.cmdline())
                # A managed vLLM and every process below it (its engine core) are not ours.
                below = any(parent.pid in self._skipped for parent in proc.parents())
                if proc.pid != self.pid and (below or any(x in command for x in self.exclude)):
                    self._skipped.add(proc.pid)
                    continue
                cpu = _cpu_s(proc)
                role = "main" if proc.pid == self.pid else "workers"
                delta = cpu - self._last.get(proc.pid, 0.0)
                self._last[proc.pid] = cpu
                used[role] += delta
                if role == "workers":
                    workers += 1
                    self._seen_workers.add(proc.pid)
        with contextlib.suppress(psutil.Error):
            for thread in root.threads():
                self._threads[thread.id] = thread.user_time + thread.system_time
        for role, delta in used.items():
            self._totals[role] += delta
        if self._t:
            span = max(now - self._t, 1e-3)
            self.series.append((now, used["main"] / span, used["workers"] / span, workers))
        self._t = now

    async def run(self) -> None:
        """Sample until cancelled."""
        while True:
            self._sample()
            await asyncio.sleep(self.interval_s)

    def summary(self, t0: float | None = None, t1: float | None = None) -> dict[str, Any]:
        """Totals over the run; cores used by each role over ``t0..t1`` (the busy window)."""
        lo, hi = t0 or 0.0, t1 or float("inf")
        window = [s for s in self.series if lo <= s[0] <= hi]
        out: dict[str, Any] = {
            "main_cpu_s": round(self._totals["main"], 1),
            "workers_cpu_s": round(self._totals["workers"], 1),
            "worker_processes": len(self._seen_workers),
        }
        if window:
            for index, role in ((1, "main"), (2, "workers")):
                values = [s[index] for s in window]
                out[f"{role}_cores_mean"] = round(statistics.fmean(values), 2)
                out[f"{role}_cores_p95"] = round(sorted(values)[int(0.95 * (len(values) - 1))], 2)
        threads = sorted(self._threads.items(), key=lambda item: -item[1])
        # The main thread's id is the process id.
        out["main_threads_cpu_s"] = [
            ("main-thread" if tid == self.pid else "thread", round(cpu, 1))
            for tid, cpu in threads[:6]
        ]
        out["main_threads"] = len(threads)
        return out
