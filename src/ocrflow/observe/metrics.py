"""Prometheus metrics of a batch run or of ``ocrflow serve``, all prefixed ``ocrflow_``.

One :class:`Metrics` object owns its own ``CollectorRegistry`` (never the library's global
one): a process may hold several (tests do), and nothing leaks between them. It is a
progress listener (``document_started`` / ``pages_finished`` / ``document_finished``, the
``Progress`` protocol of ``pipeline.py``), so counters move as pages finish; engines are
watched through :meth:`Metrics.instrument`, which times every request and, for
OpenAI-compatible engines, passes through the vLLM gauges the engine already polls from
each replica's ``/metrics`` (``ocrflow_vllm_*{server}``).

``ocrflow run --metrics-port P`` serves the registry on ``127.0.0.1:P`` (see
:func:`serve_metrics`); the job service mounts :meth:`Metrics.render` at ``/metrics``.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator, Mapping
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    start_http_server,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from ocrflow.errors import ConfigError
from ocrflow.inputs.source import Source
from ocrflow.types import DocumentResult, EngineReply, PageRequest, PageResult

log = logging.getLogger("ocrflow.metrics")

#: Engine latency buckets, s: an embedded CPU page (~0.3-3 s) to a long VLM page (minutes).
ENGINE_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 320.0)
#: vLLM gauges passed through: our name -> the key ``engines.metrics`` parses it into.
VLLM_GAUGES = {
    "ocrflow_vllm_num_requests_running": ("running", "Requests vLLM is running (vllm:*)."),
    "ocrflow_vllm_num_requests_waiting": ("waiting", "Requests waiting in vLLM's queue."),
    "ocrflow_vllm_kv_cache_usage_perc": ("kv_cache", "vLLM's KV-cache usage, 0-1."),
}
CONTENT_TYPE = CONTENT_TYPE_LATEST


class Metrics:
    """The ``ocrflow_`` metrics of one process, in a registry of their own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        registry = self.registry
        self.pages = Counter(
            "ocrflow_pages", "Pages finished, by route and status.", ["route", "status"],
            registry=registry,
        )  # fmt: skip
        self.documents = Counter(
            "ocrflow_documents", "Documents finished, by status and reason.", ["status", "reason"],
            registry=registry,
        )  # fmt: skip
        self.engine_seconds = Histogram(
            "ocrflow_engine_request_seconds", "Seconds one engine request took.",
            buckets=ENGINE_BUCKETS, registry=registry,
        )  # fmt: skip
        self.jobs = Gauge("ocrflow_jobs", "Service jobs by status.", ["status"], registry=registry)
        self.queue_pages = Gauge(
            "ocrflow_queue_pages", "Pages known and not finished yet.", registry=registry
        )
        self.engines = _EngineCollector()
        registry.register(self.engines)
        self._queued = 0

    # -- the Progress protocol (pipeline.py) ------------------------------------------------
    def document_started(self, source: Source, pages: int) -> None:
        """A document's pages joined the queue."""
        self._queued += pages
        self.queue_pages.set(self._queued)

    def pages_finished(self, results: list[PageResult]) -> None:
        """Count finished pages by route and status."""
        for page in results:
            self.pages.labels(route=str(page.route), status=str(page.status)).inc()
        # A resumed document may finish pages it did not announce: never go below zero.
        self._queued = max(0, self._queued - len(results))
        self.queue_pages.set(self._queued)

    def document_finished(self, source: Source, result: DocumentResult, skipped: bool) -> None:
        """Count a finished document (not one an earlier run finished)."""
        if not skipped:
            reason = result.reason or ""
            self.documents.labels(status=str(result.status), reason=reason).inc()

    # -- the service ------------------------------------------------------------------------
    def set_jobs(self, counts: Mapping[str, int], queue_pages: int | None = None) -> None:
        """Set ``ocrflow_jobs{status}`` (every status given, 0 included) and, when given,
        ``ocrflow_queue_pages`` (the service knows them from its database)."""
        for status, count in counts.items():
            self.jobs.labels(status=status).set(count)
        if queue_pages is not None:
            self._queued = queue_pages
            self.queue_pages.set(queue_pages)

    # -- engines ----------------------------------------------------------------------------
    def instrument(self, engine: Any) -> InstrumentedEngine:
        """``engine`` with every request timed and counted in flight; its vLLM gauges (if it
        polls any) are exported until it is closed."""
        return InstrumentedEngine(engine, self)

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric (content type ``CONTENT_TYPE``)."""
        return generate_latest(self.registry)


class InstrumentedEngine:
    """An engine that reports each request to a :class:`Metrics`; otherwise the same engine
    (attributes such as ``name`` or ``default_target_dim`` are the wrapped engine's)."""

    def __init__(self, engine: Any, metrics: Metrics) -> None:
        self._engine = engine
        self._metrics = metrics
        metrics.engines.watch(self)
        self.in_flight = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)

    @property
    def wrapped(self) -> Any:
        """The engine this one reports on."""
        return self._engine

    async def infer(self, request: PageRequest) -> EngineReply:
        """Send the request through the wrapped engine, timing it."""
        started = time.perf_counter()
        self.in_flight += 1
        try:
            reply: EngineReply = await self._engine.infer(request)
        except BaseException:
            self._metrics.engine_seconds.observe(time.perf_counter() - started)
            raise
        finally:
            self.in_flight -= 1
        # The engine's own latency leaves out the wait for a free slot on our side.
        self._metrics.engine_seconds.observe(reply.latency_s or time.perf_counter() - started)
        return reply

    async def aclose(self) -> None:
        """Stop exporting this engine's gauges and close it."""
        self._metrics.engines.unwatch(self)
        await self._engine.aclose()


class _EngineCollector(Collector):
    """Reads the watched engines at scrape time: requests in flight, and the vLLM gauges
    that OpenAI-compatible engines poll from their replicas (``Replica.metrics``)."""

    def __init__(self) -> None:
        self._engines: list[InstrumentedEngine] = []

    def watch(self, engine: InstrumentedEngine) -> None:
        self._engines.append(engine)

    def unwatch(self, engine: InstrumentedEngine) -> None:
        with contextlib.suppress(ValueError):
            self._engines.remove(engine)

    def describe(self) -> list[Any]:
        return []  # collected at scrape time only: nothing to check at registration

    def collect(self) -> Iterator[GaugeMetricFamily]:
        engines = list(self._engines)
        yield GaugeMetricFamily(
            "ocrflow_engine_requests_in_flight",
            "Engine requests sent and not answered yet.",
            value=sum(_in_flight(e) for e in engines),
        )
        replicas = [r for e in engines for r in getattr(e.wrapped, "replicas", ())]
        for name, (key, help_text) in VLLM_GAUGES.items():
            family = GaugeMetricFamily(name, help_text, labels=["server"])
            for replica in replicas:
                if replica.has_metrics and key in replica.metrics:
                    family.add_metric([replica.url], replica.metrics[key])
            yield family


def _in_flight(engine: InstrumentedEngine) -> int:
    """Requests on the wire: an OpenAI engine's replicas count those that hold a slot
    (pages waiting for one are not in flight yet); other engines count calls under way."""
    replicas = getattr(engine.wrapped, "replicas", None)
    if replicas is not None:
        return sum(r.in_flight for r in replicas)
    return engine.in_flight


@contextlib.contextmanager
def serve_metrics(
    port: int | None, *, host: str = "127.0.0.1", linger_s: float = 0.0
) -> Iterator[Metrics | None]:
    """Serve a fresh :class:`Metrics` at ``http://host:port/metrics`` for the ``with`` block
    (``None`` and nothing served when ``port`` is ``None``). At exit the endpoint stays up
    ``linger_s`` more seconds, so a scrape after the last page still sees the totals;
    Ctrl-C ends that wait early."""
    if port is None:
        yield None
        return
    metrics = Metrics()
    try:
        server, thread = start_http_server(port, addr=host, registry=metrics.registry)
    except OSError as exc:
        raise ConfigError(f"--metrics-port {port}: cannot listen on {host}: {exc}") from None
    log.info("metrics at http://%s:%d/metrics", host, server.server_port)
    try:
        yield metrics
        _linger(linger_s)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5.0)


def _linger(seconds: float) -> None:
    if seconds > 0:
        with contextlib.suppress(KeyboardInterrupt):
            time.sleep(seconds)
