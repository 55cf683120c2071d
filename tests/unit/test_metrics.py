"""``ocrflow.metrics``: counters from progress events, engine timing, registries kept apart."""

from __future__ import annotations

import asyncio
import socket
from dataclasses import dataclass, field

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from ocrflow.engines.limiter import ReplicaLimiter
from ocrflow.engines.openai import Replica
from ocrflow.errors import EngineUnavailable
from ocrflow.inputs.source import Source
from ocrflow.observe.metrics import Metrics, serve_metrics
from ocrflow.types import (
    DocStatus,
    DocumentResult,
    EngineReply,
    PageImage,
    PageRequest,
    PageResult,
    PageStatus,
    Route,
)


def _values(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = metrics.render().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


@dataclass
class SlowEngine:
    """Answers after ``delay`` (or raises), reporting ``latency`` as its own."""

    name: str = "slow"
    image_encoding: str = "png"
    latency: float = 0.25
    fail: bool = False
    replicas: list[Replica] = field(default_factory=list)
    closed: bool = False

    async def infer(self, request: PageRequest) -> EngineReply:
        await asyncio.sleep(0.01)
        if self.fail:
            raise EngineUnavailable("down")
        return EngineReply(text="x", latency_s=self.latency, engine=self.name)

    async def aclose(self) -> None:
        self.closed = True


def test_progress_events_move_the_counters() -> None:
    metrics = Metrics()
    source = Source(uri="/tmp/a.pdf", rel="a.pdf", kind="pdf", size=10)
    metrics.document_started(source, 3)
    assert _values(metrics)[("ocrflow_queue_pages", ())] == 3
    pages = [
        PageResult(1, "a", Route.ENGINE),
        PageResult(2, "b", Route.FALLBACK),
        PageResult(3, "", Route.NONE, PageStatus.FAILED),
    ]
    metrics.pages_finished(pages)
    failed = DocumentResult("d", "/tmp/a.pdf", DocStatus.PARTIAL, reason="fallback_pages")
    metrics.document_finished(source, failed, skipped=False)
    metrics.document_finished(source, failed, skipped=True)  # an earlier run's: not counted
    values = _values(metrics)
    assert values[("ocrflow_pages_total", (("route", "engine"), ("status", "ok")))] == 1
    assert values[("ocrflow_pages_total", (("route", "fallback"), ("status", "ok")))] == 1
    assert values[("ocrflow_pages_total", (("route", "none"), ("status", "failed")))] == 1
    key = ("ocrflow_documents_total", (("reason", "fallback_pages"), ("status", "partial")))
    assert values[key] == 1
    assert values[("ocrflow_queue_pages", ())] == 0
    assert _values(Metrics()).get(key) is None  # each object has its own registry


def test_instrumented_engine_times_requests_and_exports_vllm_gauges() -> None:
    metrics = Metrics()
    replica = Replica("http://gpu1:8000/v1", ReplicaLimiter(8))
    replica.has_metrics = True
    replica.metrics = {"running": 5.0, "waiting": 2.0, "kv_cache": 0.4}
    replica.in_flight = 3
    engine = SlowEngine(replicas=[replica])
    wrapped = metrics.instrument(engine)
    assert wrapped.name == "slow" and wrapped.image_encoding == "png"
    request = PageRequest(image=PageImage(b"x", 1, 1, "png"))
    asyncio.run(wrapped.infer(request))
    engine.fail = True
    with pytest.raises(EngineUnavailable):
        asyncio.run(wrapped.infer(request))
    values = _values(metrics)
    assert values[("ocrflow_engine_request_seconds_count", ())] == 2
    assert values[("ocrflow_engine_request_seconds_bucket", (("le", "0.25"),))] >= 1
    assert values[("ocrflow_engine_requests_in_flight", ())] == 3  # the replica's slots
    server = (("server", "http://gpu1:8000/v1"),)
    assert values[("ocrflow_vllm_num_requests_waiting", server)] == 2
    assert values[("ocrflow_vllm_kv_cache_usage_perc", server)] == 0.4
    asyncio.run(wrapped.aclose())
    assert engine.closed
    assert ("ocrflow_vllm_num_requests_waiting", server) not in _values(metrics)


def test_service_gauges() -> None:
    metrics = Metrics()
    metrics.set_jobs({"queued": 2, "running": 1, "done": 0}, queue_pages=40)
    values = _values(metrics)
    assert values[("ocrflow_jobs", (("status", "queued"),))] == 2
    assert values[("ocrflow_jobs", (("status", "done"),))] == 0
    assert values[("ocrflow_queue_pages", ())] == 40


def test_serve_metrics_serves_then_stops() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/metrics"
    with serve_metrics(port) as metrics:
        assert metrics is not None
        metrics.pages.labels(route="engine", status="ok").inc(7)
        text = httpx.get(url, timeout=5).text
        assert 'ocrflow_pages_total{route="engine",status="ok"} 7.0' in text
    with pytest.raises(httpx.TransportError):
        httpx.get(url, timeout=2)
    with serve_metrics(None) as nothing:
        assert nothing is None
