"""What ``bench_vlm.py`` measures around one run of ocrflow against the fake VLM server.

- the CPU of the command's process tree, by role (the main process and its render
  workers), with its wall time and peak RSS;
- the server's batch over time (running, waiting, generated tokens), polled from its
  ``/metrics``;
- the figures drawn from them: the steady state while the batch was full, and the makespan
  a perfect client would need.

A sibling of ``bench_vlm.py``, imported from it as ``vlm_measurement`` (``bench/`` is first
on ``sys.path`` when a script there runs).
"""

from __future__ import annotations

import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field

import httpx
import psutil


# -- measuring a process tree ------------------------------------------------------------
@dataclass
class TreeCpu:
    """CPU seconds of a command's processes, by role, and its wall time and peak RSS."""

    returncode: int
    wall_s: float
    main_cpu_s: float
    workers_cpu_s: float
    peak_rss_mb: float
    stdout: str
    stderr: str
    #: Share of the whole machine's CPU time that was busy (anyone's) during the run.
    machine_busy: float = 0.0

    @property
    def cpu_s(self) -> float:
        return self.main_cpu_s + self.workers_cpu_s


def run_split(cmd: list[str], interval: float = 0.1, timeout: float = 3600) -> TreeCpu:
    """Run ``cmd``; sample the CPU of each process of its tree (the root is "main").

    Like ``bench/treemem.run_measured``, but kept per process so that the main process and
    the render workers can be told apart. A worker's last ``interval`` before it exits is
    lost (workers are recycled every 500 jobs: a few per run).
    """
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        machine0 = psutil.cpu_times()
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True)
        root = psutil.Process(proc.pid)
        cpu: dict[int, float] = {}
        peak = 0.0
        while proc.poll() is None:
            try:
                procs = [root, *root.children(recursive=True)]
            except psutil.Error:
                procs = []
            rss = 0
            for p in procs:
                try:
                    times = p.cpu_times()
                    cpu[p.pid] = times.user + times.system
                    rss += p.memory_info().rss
                except psutil.Error:
                    pass
            peak = max(peak, rss / 2**20)
            if time.perf_counter() - started > timeout:
                proc.kill()
            time.sleep(interval)
        wall = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        machine1 = psutil.cpu_times()
        total = sum(machine1) - sum(machine0)
        idle = (machine1.idle + machine1.iowait) - (machine0.idle + machine0.iowait)
        main = cpu.pop(proc.pid, 0.0)
        return TreeCpu(
            proc.returncode,
            wall,
            main,
            sum(cpu.values()),
            peak,
            out.read(),
            err.read(),
            machine_busy=1 - idle / total if total > 0 else 0.0,
        )


# -- watching the server ------------------------------------------------------------------
@dataclass
class Sample:
    """One poll of ``/metrics``: monotonic time, requests running and waiting, tokens so far."""

    t: float
    running: float
    waiting: float
    tokens: float


@dataclass
class Watcher:
    """Polls the server's ``/metrics`` in a thread: running, waiting, generated tokens."""

    url: str
    interval: float = 0.25
    samples: list[Sample] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> Watcher:
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join()

    def _loop(self) -> None:
        with httpx.Client(timeout=5) as client:
            while not self._stop.is_set():
                try:
                    text = client.get(self.url + "/metrics").text
                except httpx.HTTPError:
                    text = ""
                values = _metric_values(text)
                if values:
                    self.samples.append(
                        Sample(
                            time.monotonic(),
                            values.get("vllm:num_requests_running", 0.0),
                            values.get("vllm:num_requests_waiting", 0.0),
                            values.get("vllm:generation_tokens_total", 0.0),
                        )
                    )
                self._stop.wait(self.interval)


def _metric_values(text: str) -> dict[str, float]:
    """The ``vllm:`` metrics of a Prometheus text page, by name (labels dropped)."""
    values: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("vllm:"):
            name = line.split("{", 1)[0]
            values[name] = float(line.rsplit(" ", 1)[1])
    return values


# -- figures drawn from them --------------------------------------------------------------
def steady_state(samples: list[Sample], max_num_seqs: int) -> tuple[float, float] | None:
    """(seconds, tokens/s) from the first to the last sample with a full batch (``max_num_seqs``
    running)."""
    full = [s for s in samples if s.running >= max_num_seqs]
    if len(full) < 2 or full[-1].t - full[0].t < 1:
        return None
    span = full[-1].t - full[0].t
    return span, (full[-1].tokens - full[0].tokens) / span


def ideal_makespan(pages: int, capacity: dict[str, float]) -> float:
    """Seconds a perfect client needs: all pages at t=0, batches of ``max_num_seqs``."""
    seqs = int(capacity["max_num_seqs"])
    tokens = capacity["tokens_per_page"]

    def batch(n: int) -> float:
        return tokens * (capacity["step_base_s"] + capacity["step_per_seq_s"] * n)

    full, rest = divmod(pages, seqs)
    return full * batch(seqs) + (batch(rest) if rest else 0.0)
