"""OpenAI-compatible chat-completions engine (vLLM, SGLang, hosted providers).

The client owns concurrency: vLLM queues without bound, so each replica gets an in-flight
limit that ``ReplicaLimiter`` steers from the server's own ``/metrics``
(``vllm:num_requests_running`` / ``vllm:num_requests_waiting``) or, without metrics, from
how often the server refuses work (429/503). Pages wait for a slot on our side, earliest
deadline first, so a retried page goes ahead of pages that have not been tried yet. Each
request goes to the least-loaded healthy replica; a replica whose ``/health`` fails is
drained and probed in the background until it comes back.

Transport: ``httpx``, sharded into several small ``AsyncClient`` pools. One pool of 128+
connections costs 5-13 ms of CPU per request (httpcore scans every connection and every
queued request on each event); pools of ~16 connections cost ~1.3 ms (see
``bench/bench_vlm.py``).
"""

from __future__ import annotations

import asyncio
import base64
import heapq
import itertools
import json
import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from ocrflow.engines.limiter import ReplicaLimiter
from ocrflow.engines.metrics import parse_vllm_metrics
from ocrflow.engines.readiness import ProgressNotes, Readiness, ReadyWatch, probe_server
from ocrflow.errors import ConfigError, EngineError, EngineRejected, EngineUnavailable
from ocrflow.types import EngineReply, PageRequest

log = logging.getLogger("ocrflow.engine")

#: vLLM 0.32's 400s for a request that does not fit (it clamps ``max_tokens`` to the room
#: the prompt leaves): "This model's maximum context length is N tokens. However, your
#: prompt contains …", "Input length (P) exceeds model's maximum context length (N).",
#: "max_tokens=M cannot be greater than max_model_len=N" and, for a prompt of exactly N
#: tokens, "max_tokens must be at least 1, got 0". All are fixed by a smaller image or
#: fewer output tokens (the reader shrinks both).
_CONTEXT_OVERFLOW_MARKERS = (
    "maximum context length",
    "max_model_len",
    "context length",
    "maximum model length",
    "max_tokens must be at least 1, got 0",
)
#: Requests one httpx pool carries at once before another pool is opened (see module doc).
SHARD_REQUESTS = 16


@dataclass
class Replica:
    """One server; ``url`` is its OpenAI base URL (…/v1)."""

    url: str
    limiter: ReplicaLimiter
    in_flight: int = 0
    healthy: bool = True
    failures: int = 0
    checking: bool = False
    has_metrics: bool | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    completed: int = 0
    #: The context length the server reports for the model (``/v1/models``), if any.
    max_model_len: int | None = None

    @property
    def root(self) -> str:
        return self.url.rstrip("/").removesuffix("/v1")

    @property
    def load(self) -> float:
        return self.in_flight / max(self.limiter.limit, 1)

    @property
    def free(self) -> bool:
        return self.healthy and self.in_flight < int(self.limiter.limit)


class _Shards:
    """Several small httpx pools; each request goes to the least busy one."""

    def __init__(self, headers: dict[str, str], timeout: httpx.Timeout) -> None:
        self._headers = headers
        self._timeout = timeout
        self._clients: list[httpx.AsyncClient] = []
        self._active: list[int] = []

    def acquire(self) -> int:
        """The index of a pool with room, opening one when all are busy."""
        if self._active:
            index = min(range(len(self._active)), key=self._active.__getitem__)
            if self._active[index] < SHARD_REQUESTS:
                self._active[index] += 1
                return index
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=SHARD_REQUESTS * 2)
        self._clients.append(
            httpx.AsyncClient(headers=self._headers, timeout=self._timeout, limits=limits)
        )
        self._active.append(1)
        return len(self._clients) - 1

    def release(self, index: int) -> None:
        self._active[index] -= 1

    def client(self, index: int) -> httpx.AsyncClient:
        return self._clients[index]

    async def aclose(self) -> None:
        await asyncio.gather(*(c.aclose() for c in self._clients), return_exceptions=True)
        self._clients.clear()
        self._active.clear()


@dataclass(order=True)
class _Waiter:
    """A request waiting for a slot; ordered by deadline, then by arrival."""

    deadline: float
    seq: int
    future: asyncio.Future[Replica] = field(compare=False)


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
    ) -> None:
        if not servers:
            raise EngineError("no server given; pass --server http://host:port/v1")
        for url in servers:
            _check_url(url)
        self.model = model
        self.image_encoding = image_encoding
        self.request_timeout_s = request_timeout_s
        self.poll_interval_s = poll_interval_s
        self.unhealthy_after = unhealthy_after
        self._progress = (progress_after_s, progress_every_s)
        self._keyed = bool(api_key)
        start = max_concurrency or 32
        self.replicas = [
            Replica(
                _v1(url),
                ReplicaLimiter(
                    start, adaptive=max_concurrency is None, target_waiting=target_waiting
                ),
            )
            for url in servers
        ]
        # The key travels only in this header: never in a URL, a log line or an error.
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        timeout = httpx.Timeout(request_timeout_s, connect=connect_timeout_s)
        self._shards = _Shards({**headers, "Content-Type": "application/json"}, timeout)
        # Probes and metrics: few, short, on their own pool.
        self._probe_client = httpx.AsyncClient(headers=headers, timeout=timeout)
        self._waiters: list[_Waiter] = []
        self._seq = itertools.count()
        self._poller: asyncio.Task[None] | None = None
        self._checks: set[asyncio.Task[None]] = set()

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
            self._dispatch()
            await asyncio.sleep(self._poll_delay())

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
        return bool(self._waiters) or replica.in_flight >= int(replica.limiter.limit) - 1

    # -- slots -----------------------------------------------------------------------------
    def _pick(self) -> Replica | None:
        free = [r for r in self.replicas if r.free]
        return min(free, key=lambda r: r.load) if free else None

    async def _acquire(self, deadline: float) -> Replica:
        """A slot on the least-loaded replica; waiters are served earliest deadline first."""
        if not self._waiters:
            replica = self._pick()
            if replica is not None:
                replica.in_flight += 1
                return replica
        waiter = _Waiter(deadline, next(self._seq), asyncio.get_running_loop().create_future())
        heapq.heappush(self._waiters, waiter)
        self._dispatch()  # cancelled waiters ahead of us may be all that is queued
        if not any(r.healthy for r in self.replicas):
            self._start_poller()
        try:
            return await waiter.future
        except asyncio.CancelledError:
            # Handed a slot in the same instant we were cancelled: give it back.
            if waiter.future.done() and not waiter.future.cancelled():
                self._release(waiter.future.result())
            raise

    def _dispatch(self) -> None:
        """Hand free slots to waiters, earliest deadline first."""
        while self._waiters:
            if self._waiters[0].future.done():  # cancelled while waiting
                heapq.heappop(self._waiters)
                continue
            replica = self._pick()
            if replica is None:
                return
            waiter = heapq.heappop(self._waiters)
            replica.in_flight += 1
            waiter.future.set_result(replica)

    def _release(self, replica: Replica) -> None:
        replica.in_flight -= 1
        self._dispatch()

    # -- requests --------------------------------------------------------------------------
    async def infer(self, request: PageRequest) -> EngineReply:
        """Send one page; raise ``EngineUnavailable`` (retry later) or ``EngineRejected``.

        Waiting for a slot is bounded by the caller (the page's deadline); the request
        timeout starts only once the request is on its way.
        """
        deadline = request.deadline if request.deadline is not None else math.inf
        replica = await self._acquire(deadline)
        try:
            # Encoded only now: a body is ~1.4x the image, and hundreds of pages may wait.
            body = self._encode(request, replica.max_model_len)
            payload, latency = await self._post(replica, body)
        finally:
            self._release(replica)
        replica.failures = 0
        replica.completed += 1
        replica.limiter.on_success(bool(replica.has_metrics), self._saturated(replica))
        return _reply(payload, latency, self.name)

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
            raise EngineUnavailable(
                f"{replica.url} did not answer within {self.request_timeout_s:g} s"
            ) from exc
        except httpx.HTTPError as exc:
            self._note_failure(replica)
            raise EngineUnavailable(f"{replica.url}: {type(exc).__name__}: {exc}") from exc
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
        self._start_poller()  # it brings the replica back once it answers again
        log.warning("replica %s drained: %s", replica.url, error)

    def _check(self, answer: httpx.Response, replica: Replica) -> dict[str, Any]:
        status = answer.status_code
        replica.limiter.on_answer(status in (429, 503), time.monotonic())
        if status == 200:
            try:
                return answer.json()
            except ValueError as exc:
                raise EngineUnavailable(f"{replica.url} sent a broken body") from exc
        detail = _error_text(answer)
        if status in (429, 503):
            raise EngineUnavailable(f"{replica.url} overloaded ({status}): {detail}")
        if status >= 500 or status == 408:
            self._note_failure(replica)
            raise EngineUnavailable(f"{replica.url} failed ({status}): {detail}")
        overflow = status == 400 and any(m in detail.lower() for m in _CONTEXT_OVERFLOW_MARKERS)
        raise EngineRejected(
            f"{replica.url} rejected the request ({status}): {detail}",
            context_overflow=overflow,
            status=status,
        )

    def _encode(self, request: PageRequest, max_model_len: int | None = None) -> bytes:
        """The request body as JSON bytes.

        ``max_tokens`` is capped at the server's context length: vLLM clamps it to the room
        the prompt leaves, but answers 400 to a value above the whole context.
        """
        image = base64.b64encode(request.image.data).decode("ascii")
        image_part = {
            "type": "image_url",
            "image_url": {"url": f"data:{request.image.media_type};base64,{image}"},
        }
        parts: list[dict[str, Any]] = [image_part]
        if request.prompt:
            text_part = {"type": "text", "text": request.prompt}
            parts = [image_part, text_part] if request.image_first else [text_part, image_part]
        body = {
            "model": self.model,
            "messages": [{"role": "user", "content": parts}],
            "temperature": request.temperature,
            "max_tokens": min(request.max_tokens, max_model_len or request.max_tokens),
            **request.extra_body,
        }
        return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()

    def snapshot(self) -> list[dict[str, Any]]:
        """Per-replica state for logs and status."""
        return [
            {
                "url": r.url,
                "healthy": r.healthy,
                "in_flight": r.in_flight,
                "limit": round(r.limiter.limit, 1),
                "completed": r.completed,
                "queued_here": len(self._waiters),
                **r.metrics,
            }
            for r in self.replicas
        ]


def _check_url(url: str) -> None:
    """Refuse a server URL that httpx could never connect to (a usage error, exit 2)."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise ConfigError(f"--server {url!r} is not a valid URL: {exc}") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise ConfigError(f"--server {url!r} must be an http:// or https:// URL with a host")


def _v1(url: str) -> str:
    url = url.rstrip("/")
    return url if url.endswith("/v1") else f"{url}/v1"


def _error_text(answer: httpx.Response) -> str:
    try:
        body = answer.json()
        error = body.get("error", body) if isinstance(body, dict) else body
        message = error.get("message", error) if isinstance(error, dict) else error
        return str(message)[:500]
    except ValueError:
        return answer.text[:500]


def _reply(payload: dict[str, Any], latency: float, engine: str) -> EngineReply:
    try:
        choice = payload["choices"][0]
        text = choice["message"].get("content") or ""
    except (KeyError, IndexError, TypeError, AttributeError) as exc:
        raise EngineUnavailable(f"malformed completion: {str(payload)[:200]}") from exc
    usage = payload.get("usage") or {}
    return EngineReply(
        text=text,
        finish_reason=choice.get("finish_reason") or "stop",
        tokens_in=int(usage.get("prompt_tokens") or 0),
        tokens_out=int(usage.get("completion_tokens") or 0),
        latency_s=latency,
        engine=engine,
    )
