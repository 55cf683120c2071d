"""OpenAI-compatible chat-completions engine (vLLM, SGLang, hosted providers).

The client owns concurrency: vLLM queues without bound, so each replica gets an in-flight
limit that ``ReplicaLimiter`` steers from the server's own ``/metrics``
(``vllm:num_requests_running`` / ``vllm:num_requests_waiting``) or, without metrics, from
how often the server refuses work (429/503). Pages wait for a slot on our side
(``replicas.py``); a replica whose ``/health`` fails is drained and probed in the
background until it comes back. A circuit breaker per replica
(``breaker.py``) says at once when every request to it fails, holds pages back from it
while it does, and stops the run (``EngineFailing``) once every replica has failed for
``BreakerPolicy.fail_after_s``.

Transport: ``httpx``, sharded into several small ``AsyncClient`` pools (``http_pools.py``)
that share one TLS context. One pool of 128+ connections costs 5-13 ms of CPU per request
(httpcore scans every connection and every queued request on each event); pools of ~16
connections cost ~1.3 ms (see ``bench/bench_vlm.py``).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from typing import Any

import httpx

from ocrflow.engines.breaker import BreakerPolicy, all_failing, failing_message
from ocrflow.engines.completions import (
    ServerFailure,
    check_url,
    completion_body,
    parse_reply,
    request_body,
    v1,
)
from ocrflow.engines.http_pools import HttpPools
from ocrflow.engines.limiter import ReplicaLimiter
from ocrflow.engines.metrics import parse_vllm_metrics
from ocrflow.engines.readiness import ProgressNotes, Readiness, ReadyWatch, probe_server
from ocrflow.engines.replicas import Replica, ReplicaSlots
from ocrflow.errors import EngineError, EngineFailing, EngineRejected
from ocrflow.types import EngineReply, PageRequest

__all__ = ["OpenAIEngine", "Replica"]

log = logging.getLogger("ocrflow.engine")


class OpenAIEngine:
    """Chat completions over HTTP to one or more replicas.

    ``request_timeout_s`` bounds one request from the moment it is sent; the time a page
    waits here for a slot is bounded by its deadline only (``PageRequest.deadline``, enforced
    by the caller), so the reader does not time the queue as if it were the request.
    """

    name = "openai"

    def __init__(
        self,
        servers: list[str],
        model: str,
        *,
        api_key: str | None = None,
        image_encoding: str = "png",
        max_concurrency: int | None = None,
        request_timeout_s: float = 300.0,
        connect_timeout_s: float = 10.0,
        poll_interval_s: float = 1.0,
        unhealthy_after: int = 3,
        target_waiting: int = 8,
        progress_after_s: float = 5.0,
        progress_every_s: float = 15.0,
        breaker: BreakerPolicy | None = None,
        logprobs: bool = False,
    ) -> None:
        if not servers:
            raise EngineError("no server given; pass --server http://host:port/v1")
        for url in servers:
            check_url(url)
        self.model = model
        self.image_encoding = image_encoding
        self.request_timeout_s = request_timeout_s
        self.logprobs = logprobs  # ask for token logprobs (``--logprobs``)
        self.poll_interval_s = poll_interval_s
        self.unhealthy_after = unhealthy_after
        self._progress = (progress_after_s, progress_every_s)
        self._keyed = bool(api_key)
        start = max_concurrency or 32
        self.replicas = [
            Replica(
                v1(url),
                ReplicaLimiter(
                    start, adaptive=max_concurrency is None, target_waiting=target_waiting
                ),
                breaker_policy=breaker or BreakerPolicy(),
            )
            for url in servers
        ]
        # The key travels only in this header: never in a URL, a log line or an error.
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        timeout = httpx.Timeout(request_timeout_s, connect=connect_timeout_s)
        # One TLS context for every pool: httpx builds one per client otherwise (~20 ms
        # each, on the event loop, as the in-flight limit grows and pools are opened).
        tls = httpx.create_ssl_context()
        self._shards = HttpPools({**headers, "Content-Type": "application/json"}, timeout, tls)
        # Probes and metrics: few, short, on their own pool.
        self._probe_client = httpx.AsyncClient(headers=headers, timeout=timeout, verify=tls)
        self._slots = ReplicaSlots(self.replicas)
        self._poller: asyncio.Task[None] | None = None
        self._checks: set[asyncio.Task[None]] = set()
        #: Why every replica is failing, once they all failed for too long (``_judge``);
        #: cleared when one answers again. ``_failing_probe``: when a call last went as a
        #: probe meanwhile.
        self._failing: str | None = None
        self._failing_probe = 0.0

    # -- lifecycle -----------------------------------------------------------------------
    async def wait_ready(self, deadline_s: float = 600.0, *, unreachable_s: float = 60.0) -> None:
        """Wait until at least one replica serves the model.

        A server that answers but is still loading is waited for up to ``deadline_s``
        (``EngineUnavailable`` then); servers that all stay unreachable for
        ``unreachable_s`` raise ``EngineUnreachable``; a refused key ``EngineAuthError`` at
        once; a server listing other models ``ModelNotServed``. While waiting, a progress
        line is logged at WARNING (seen with ``-q``) after a few seconds, then every ~15 s.
        """
        after_s, every_s = self._progress
        watch = ReadyWatch(
            self.model, deadline_s, unreachable_s, keyed=self._keyed,
            notes=ProgressNotes(after_s, every_s),
        )  # fmt: skip
        while True:
            looks = await asyncio.gather(*(self._probe(r) for r in self.replicas))
            for replica, look in zip(self.replicas, looks, strict=True):
                replica.healthy = look.state == "ready"
            if any(r.healthy for r in self.replicas):
                self._start_poller()
                return
            watch.judge(looks)
            await asyncio.sleep(min(self.poll_interval_s, max(0.05, watch.left_s())))

    async def _probe(self, replica: Replica) -> Readiness:
        """One look at ``replica``; remembers the context length it reports."""
        look = await probe_server(self._probe_client, replica.url, self.model)
        if look.max_model_len is not None:
            replica.max_model_len = look.max_model_len
        return look

    async def _probe_ready(self, replica: Replica) -> str | None:
        """``None`` when ready, else why not."""
        return (await self._probe(replica)).error

    def _start_poller(self) -> None:
        if self._poller is None:
            self._poller = asyncio.get_running_loop().create_task(self._poll_forever())

    async def aclose(self) -> None:
        """Stop polling and close the connection pools."""
        for check in list(self._checks):
            check.cancel()
        if self._poller is not None:
            self._poller.cancel()
            await asyncio.gather(self._poller, return_exceptions=True)
            self._poller = None
        await self._shards.aclose()
        await self._probe_client.aclose()

    # -- background polling ----------------------------------------------------------------
    async def _poll_forever(self) -> None:
        while True:
            await asyncio.gather(*(self._poll(r) for r in self.replicas))
            self._judge()
            self._slots.dispatch()
            await asyncio.sleep(self._poll_delay())

    def _judge(self) -> None:
        """Give up once every replica has failed for too long: the waiting pages, and later
        calls except a probe now and then, get ``EngineFailing``."""
        now = time.monotonic()
        breakers = [r.breaker for r in self.replicas]
        if self._failing is None:
            if not all_failing(breakers, now):
                return
            # Said once, by whoever stops: the CLI's error line, the job service's log.
            self._failing = failing_message(breakers, now)
            self._failing_probe = now
        message = self._failing
        self._slots.fail_all(lambda: EngineFailing(message))

    def _admit(self) -> Replica | None:
        """While every replica is failing: raise ``EngineFailing``, except for one call
        every ``probe_every_s``, which goes at once to a healthy replica as a probe (a
        long-lived engine, the job service's, recovers with its servers). Else None: the
        call takes a slot as usual."""
        if self._failing is None:
            return None
        now = time.monotonic()
        if not all_failing([r.breaker for r in self.replicas], now):
            self._failing = None  # a server answered again
            return None
        healthy = [r for r in self.replicas if r.healthy]
        every = self.replicas[0].breaker.policy.probe_every_s
        if not healthy or now - self._failing_probe < every:
            raise EngineFailing(self._failing)
        self._failing_probe = now
        replica = min(healthy, key=lambda r: r.load)
        replica.in_flight += 1
        return replica

    def _poll_delay(self) -> float:
        """Poll four times as often while a limit is still looking for the server's size.

        Until a replica's queue was first seen, its limit grows at every poll: polling
        faster then fills the batch sooner at the start of a run.
        """
        ramping = any(
            r.has_metrics and r.limiter.adaptive and not r.limiter.queue_seen and self._saturated(r)
            for r in self.replicas
        )
        return self.poll_interval_s / 4 if ramping else self.poll_interval_s

    async def _poll(self, replica: Replica) -> None:
        if not replica.healthy:
            replica.healthy = await self._probe_ready(replica) is None
            if replica.healthy:
                replica.failures = 0
                replica.breaker.probe_soon()
                log.info("replica %s is back", replica.url)
            return
        if replica.has_metrics is False:
            return
        try:
            answer = await self._probe_client.get(f"{replica.root}/metrics", timeout=5.0)
        except httpx.HTTPError:
            return
        if answer.status_code != 200:
            replica.has_metrics = False
            return
        replica.metrics = parse_vllm_metrics(answer.text)
        replica.has_metrics = "waiting" in replica.metrics
        if replica.has_metrics:
            replica.limiter.on_metrics(
                replica.metrics.get("running", 0.0),
                replica.metrics["waiting"],
                replica.in_flight,
                self._saturated(replica),
            )

    def _saturated(self, replica: Replica) -> bool:
        """Whether the replica's limit (not a lack of pages) holds requests back."""
        return bool(self._slots.waiting) or replica.in_flight >= int(replica.limiter.limit) - 1

    # -- slots -----------------------------------------------------------------------------
    async def _acquire(self, deadline: float) -> Replica:
        """A slot on a replica (``ReplicaSlots``); the poller runs while any replica is
        drained or failing: it brings replicas back, sends probes and stops the run."""
        if not all(r.healthy and not r.breaker.is_open for r in self.replicas):
            self._start_poller()
        return await self._slots.acquire(deadline)

    # -- requests --------------------------------------------------------------------------
    async def infer(self, request: PageRequest) -> EngineReply:
        """Send one page; raise ``EngineUnavailable`` (retry later), ``EngineRejected``, or
        ``EngineFailing`` once every replica has failed for too long (stop the run).

        Waiting for a slot is bounded by the caller (the page's deadline); the request
        timeout starts only once the request is on its way.
        """
        deadline = request.deadline if request.deadline is not None else math.inf
        replica = self._admit() or await self._acquire(deadline)
        try:
            # Encoded only now: a body is ~1.4x the image, and hundreds of pages may wait.
            body = self._encode(request, replica.max_model_len)
            payload, latency = await self._post(replica, body)
            reply = parse_reply(payload, latency, self.name, replica.url)
        except ServerFailure as exc:
            replica.breaker.failed(exc.cause, time.monotonic())
            self._judge()
            if self._failing is not None:
                raise EngineFailing(self._failing) from exc
            raise
        except EngineRejected:
            replica.breaker.succeeded(time.monotonic())  # it answered, on purpose
            raise
        except BaseException:
            replica.breaker.probe_ended()
            raise
        finally:
            self._slots.release(replica)
        replica.breaker.succeeded(time.monotonic())
        replica.failures = 0
        replica.completed += 1
        replica.limiter.on_success(bool(replica.has_metrics), self._saturated(replica))
        return reply

    async def _post(self, replica: Replica, body: bytes) -> tuple[dict[str, Any], float]:
        shard = self._shards.acquire()
        started = time.monotonic()
        try:
            # httpx's timeouts bound each read; this bounds the whole exchange.
            async with asyncio.timeout(self.request_timeout_s):
                answer = await self._shards.client(shard).post(
                    f"{replica.url}/chat/completions", content=body
                )
        except (TimeoutError, httpx.TimeoutException) as exc:
            cause = f"did not answer within {self.request_timeout_s:g} s"
            raise ServerFailure(replica.url, cause) from exc
        except httpx.HTTPError as exc:
            self._note_failure(replica)
            raise ServerFailure(replica.url, f"{type(exc).__name__}: {exc}") from exc
        finally:
            self._shards.release(shard)
        return self._check(answer, replica), time.monotonic() - started

    def _note_failure(self, replica: Replica) -> None:
        """Consecutive failures make us ask the replica's /health; only a failed check drains
        it (a live server answering some 500s keeps its place)."""
        replica.failures += 1
        if replica.failures >= self.unhealthy_after and replica.healthy and not replica.checking:
            replica.checking = True
            task = asyncio.get_running_loop().create_task(self._verify(replica))
            self._checks.add(task)
            task.add_done_callback(self._checks.discard)

    async def _verify(self, replica: Replica) -> None:
        try:
            error = await self._probe_ready(replica)
        finally:
            replica.checking = False
        if error is None:
            replica.failures = 0
            return
        replica.healthy = False
        replica.breaker.trip(f"health check failed: {error}", time.monotonic())
        self._start_poller()  # it brings the replica back once it answers again
        log.warning("replica %s drained: %s", replica.url, error)

    def _check(self, answer: httpx.Response, replica: Replica) -> dict[str, Any]:
        status = answer.status_code
        replica.limiter.on_answer(status in (429, 503), time.monotonic())
        if (status >= 500 and status != 503) or status == 408:
            self._note_failure(replica)
        return completion_body(answer, replica.url)

    def _encode(self, request: PageRequest, max_model_len: int | None = None) -> bytes:
        """The request body as JSON bytes (``completions.request_body``)."""
        return request_body(request, self.model, max_model_len, logprobs=self.logprobs)

    def snapshot(self) -> list[dict[str, Any]]:
        """Per-replica state for logs and status."""
        return [
            {
                "url": r.url,
                "healthy": r.healthy,
                "in_flight": r.in_flight,
                "limit": round(r.limiter.limit, 1),
                "completed": r.completed,
                "failing": r.breaker.is_open,
                "queued_here": self._slots.waiting,
                **r.metrics,
            }
            for r in self.replicas
        ]
