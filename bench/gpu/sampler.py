"""Samples vLLM's ``/metrics`` on every server and ``nvidia-smi`` on every GPU while a
client runs; ``bench_gpu.py`` averages them over the busy window."""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

GAUGES = {
    "vllm:num_requests_running": "running",
    "vllm:num_requests_waiting": "waiting",
    "vllm:kv_cache_usage_perc": "kv",
}
COUNTERS = {
    "vllm:prompt_tokens_total": "prompt_tokens",
    "vllm:generation_tokens_total": "generation_tokens",
    "vllm:request_success_total": "requests",
}


def read_metrics(text: str) -> dict[str, float]:
    """The gauges and counters we print, summed over label sets (a data-parallel server
    reports one set per engine)."""
    found: dict[str, float] = {}
    wanted = {**GAUGES, **COUNTERS}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = wanted.get(sample.name)
            if key is not None:
                found[key] = found.get(key, 0.0) + float(sample.value)
    return found


def metrics_url(server: str) -> str:
    """``http://host:port/metrics`` of an OpenAI base URL."""
    return server.rstrip("/").removesuffix("/v1") + "/metrics"


@dataclass
class Sampler:
    """Polls every server's ``/metrics`` and ``nvidia-smi`` in the background of a run.

    A sample holds the servers' gauges summed (``running``...) and each server's own
    ``running`` (``by_server``); servers can be added while it runs (``follow``: replicas
    that ocrflow starts itself answer one by one).
    """

    metrics_urls: list[str] = field(default_factory=list)
    interval_s: float = 0.25
    samples: list[dict[str, Any]] = field(default_factory=list)
    #: (time, GPU index, utilisation %, memory MiB, power W)
    gpu: list[tuple[float, int, float, float, float]] = field(default_factory=list)
    first: dict[str, dict[str, float]] = field(default_factory=dict)
    last: dict[str, dict[str, float]] = field(default_factory=dict)
    started: float = 0.0
    stopped: float = 0.0
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _smi: asyncio.subprocess.Process | None = None

    async def start(self, session: aiohttp.ClientSession) -> None:
        """Begin sampling; the counters' values now are the baseline."""
        self.started = time.time()
        for url in self.metrics_urls:
            self.first[url] = await self._fetch(session, url) or {}
        self._tasks.append(asyncio.create_task(self._poll(session)))
        with contextlib.suppress(OSError):
            self._smi = await asyncio.create_subprocess_exec(
                "nvidia-smi",
                "--query-gpu=index,utilization.gpu,memory.used,power.draw",
                "--format=csv,noheader,nounits",
                f"-lms={int(self.interval_s * 1000)}",
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL,
            )
            self._tasks.append(asyncio.create_task(self._read_smi()))

    async def add(self, session: aiohttp.ClientSession, url: str, *, fresh: bool) -> None:
        """Sample one more server from now on. Its counters start from zero if it is
        ``fresh`` (started for this run: its first requests may beat our first poll), else
        from their values now."""
        if url not in self.metrics_urls:
            baseline = dict.fromkeys(COUNTERS.values(), 0.0) if fresh else None
            self.first[url] = baseline or await self._fetch(session, url) or {}
            self.metrics_urls.append(url)

    async def stop(self, session: aiohttp.ClientSession) -> None:
        """End sampling; the counters' values now close the run."""
        self.stopped = time.time()
        if self._smi is not None:
            with contextlib.suppress(ProcessLookupError):
                self._smi.terminate()
            await self._smi.wait()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for url in self.metrics_urls:
            # A managed server is gone by now: its last sample closes the run instead.
            self.last[url] = await self._fetch(session, url) or self.last.get(url, {})

    async def _fetch(self, session: aiohttp.ClientSession, url: str) -> dict[str, float] | None:
        try:
            async with session.get(url) as answer:
                return read_metrics(await answer.text())
        except (aiohttp.ClientError, ValueError):
            return None

    async def _poll(self, session: aiohttp.ClientSession) -> None:
        while True:
            urls = list(self.metrics_urls)
            found = await asyncio.gather(*(self._fetch(session, u) for u in urls))
            now = time.time()
            seen = [(u, v) for u, v in zip(urls, found, strict=True) if v is not None]
            if seen:
                sample: dict[str, Any] = {"t": now, "by_server": {}}
                for url, values in seen:
                    self.last[url] = values
                    sample["by_server"][url] = values.get("running", 0.0)
                    for key in GAUGES.values():
                        sample[key] = sample.get(key, 0.0) + values.get(key, 0.0)
                if len(seen) > 1:
                    sample["kv"] /= len(seen)  # a share per server: their mean, not the sum
                self.samples.append(sample)
            await asyncio.sleep(self.interval_s)

    async def _read_smi(self) -> None:
        assert self._smi and self._smi.stdout
        async for line in self._smi.stdout:
            with contextlib.suppress(ValueError):
                index, util, mem, power = (float(x) for x in line.decode().split(","))
                self.gpu.append((time.time(), int(index), util, mem, power))

    def summary(self) -> dict[str, Any]:
        """Means over the busy window, and the counters' increase over the run."""
        busy = [s for s in self.samples if s.get("running", 0) + s.get("waiting", 0) > 0]
        out: dict[str, Any] = {}
        if busy:
            t0, t1 = busy[0]["t"], busy[-1]["t"]
            out["busy_s"] = round(t1 - t0, 2)
            out["busy_t0"], out["busy_t1"] = round(t0, 2), round(t1, 2)
            # Idle server time before the first request and after the last answer.
            out["lead_s"] = round(t0 - self.started, 2)
            out["tail_s"] = round(self.stopped - t1, 2)
            for key in ("running", "waiting", "kv"):
                values = [s.get(key, 0.0) for s in busy]
                out[f"{key}_mean"] = round(statistics.fmean(values), 3)
                out[f"{key}_max"] = round(max(values), 3)
            if len(self.metrics_urls) > 1:
                out["running_mean_by_server"] = {
                    url: round(statistics.fmean(s["by_server"].get(url, 0.0) for s in busy), 1)
                    for url in self.metrics_urls
                }
            out.update(self._gpu_summary(t0, t1))
        for key in COUNTERS.values():
            deltas = [
                self.last[u][key] - self.first[u][key]
                for u in self.metrics_urls
                if key in self.last.get(u, {}) and key in self.first.get(u, {})
            ]
            if deltas:
                out[key] = sum(deltas)
        return out

    def _gpu_summary(self, t0: float, t1: float) -> dict[str, Any]:
        gpu = [g for g in self.gpu if t0 <= g[0] <= t1]
        if not gpu:
            return {}
        out: dict[str, Any] = {
            "gpu_util_mean": round(statistics.fmean(g[2] for g in gpu), 1),
            "gpu_mem_mib_max": max(g[3] for g in gpu),
            "gpu_power_w_mean": round(statistics.fmean(g[4] for g in gpu), 1),
        }
        indexes = sorted({g[1] for g in gpu})
        if len(indexes) > 1:
            out["gpu_util_mean_by_gpu"] = {
                str(i): round(statistics.fmean(g[2] for g in gpu if g[1] == i), 1) for i in indexes
            }
            out["gpu_mem_mib_max_by_gpu"] = {
                str(i): max(g[3] for g in gpu if g[1] == i) for i in indexes
            }
        return out
