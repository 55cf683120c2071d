"""OpenAI-compatible chat-completions engine (vLLM, SGLang, hosted providers).

One pooled ``httpx.AsyncClient`` for every replica. The client owns concurrency: vLLM queues
without bound, so each replica gets a limit that ``ReplicaLimiter`` adapts from the server's
own ``/metrics`` (``vllm:num_requests_waiting``) or, without metrics, from 429/503 answers.
Each request goes to the least-loaded healthy replica; a replica that stops answering is
drained and probed in the background until it comes back.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from ocrflow.engines.metrics import parse_vllm_metrics
from ocrflow.errors import EngineError, EngineRejected, EngineUnavailable
from ocrflow.types import EngineReply, PageRequest

log = logging.getLogger("ocrflow.engine")

_CONTEXT_OVERFLOW_MARKERS = ("maximum context length", "max_model_len", "context length")


@dataclass
class ReplicaLimiter:
    """An adaptive in-flight limit for one replica (AIMD steered by the server's queue)."""

    limit: float
    floor: int = 1
    ceiling: int = 1024
    adaptive: bool = True
    #: Requests we want waiting in the server's queue so its batch never runs dry.
    target_waiting: int = 8
    _last_cut: float = -1e9

    def on_metrics(self, waiting: float, in_flight: int) -> None:
        """Grow while the server has no queue and we use our whole limit; shrink on a queue."""
        if not self.adaptive:
            return
        if waiting > self.target_waiting * 2:
            self.limit = max(self.floor, self.limit * 0.9)
        elif waiting < self.target_waiting and in_flight >= int(self.limit) - 1:
            self.limit = min(self.ceiling, self.limit * 1.2 + 2)

    def on_overload(self, now: float) -> None:
        """A 429/503: the server says it has too much. Back off at most once a second, so
        a burst of refusals from one moment does not collapse the limit."""
        if self.adaptive and now - self._last_cut >= 1.0:
            self._last_cut = now
            self.limit = max(self.floor, self.limit * 0.75)

    def on_success(self) -> None:
        if self.adaptive:
            self.limit = min(self.ceiling, self.limit + 1 / max(self.limit, 1))


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

    @property
    def root(self) -> str:
        return self.url.rstrip("/").removesuffix("/v1")

    @property
    def load(self) -> float:
        return self.in_flight / max(self.limiter.limit, 1)

    @property
    def free(self) -> bool:
        return self.healthy and self.in_flight < int(self.limiter.limit)


class OpenAIEngine:
    """Chat completions over HTTP to one or more replicas."""

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
    ) -> None:
        if not servers:
            raise EngineError("no server given; pass --server http://host:port/v1")
        self.model = model
        self.image_encoding = image_encoding
        self.poll_interval_s = poll_interval_s
        self.unhealthy_after = unhealthy_after
        start = max_concurrency or 32
        self.replicas = [
            Replica(_v1(url), ReplicaLimiter(start, adaptive=max_concurrency is None))
            for url in servers
        ]
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=2048)
        self._client = httpx.AsyncClient(
            headers=headers,
            timeout=httpx.Timeout(request_timeout_s, connect=connect_timeout_s),
            limits=limits,
        )
        self._changed = asyncio.Condition()
        self._poller: asyncio.Task[None] | None = None
        self._checks: set[asyncio.Task[None]] = set()

    # -- lifecycle -----------------------------------------------------------------------
    async def wait_ready(self, deadline_s: float = 600.0) -> None:
        """Wait until at least one replica serves the model; raise ``EngineUnavailable``."""
        deadline = time.monotonic() + deadline_s
        last_error = "no answer yet"
        while time.monotonic() < deadline:
            results = await asyncio.gather(*(self._probe_ready(r) for r in self.replicas))
            for replica, error in zip(self.replicas, results, strict=True):
                replica.healthy = error is None
                last_error = error or last_error
            if any(r.healthy for r in self.replicas):
                self._start_poller()
                return
            await asyncio.sleep(min(2.0, max(0.0, deadline - time.monotonic())))
        raise EngineUnavailable(f"no server became ready in {deadline_s:.0f} s: {last_error}")

    async def _probe_ready(self, replica: Replica) -> str | None:
        """``None`` when ready, else why not."""
        try:
            health = await self._client.get(f"{replica.root}/health", timeout=5.0)
            if health.status_code not in (200, 404, 401, 403):
                return f"{replica.root}/health answered {health.status_code}"
            models = await self._client.get(f"{replica.url}/models", timeout=10.0)
            if models.status_code != 200:
                return f"{replica.url}/models answered {models.status_code}"
            served = [m.get("id") for m in models.json().get("data", [])]
        except (httpx.HTTPError, ValueError) as exc:
            return f"{replica.root}: {type(exc).__name__}: {exc}"
        if self.model not in served:
            return f"{replica.url} does not serve {self.model!r} (it serves {served})"
        return None

    def _start_poller(self) -> None:
        if self._poller is None:
            self._poller = asyncio.get_running_loop().create_task(self._poll_forever())

    async def aclose(self) -> None:
        """Stop polling and close the connection pool."""
        for check in list(self._checks):
            check.cancel()
        if self._poller is not None:
            self._poller.cancel()
            await asyncio.gather(self._poller, return_exceptions=True)
            self._poller = None
        await self._client.aclose()

    # -- background polling ----------------------------------------------------------------
    async def _poll_forever(self) -> None:
        while True:
            await asyncio.gather(*(self._poll(r) for r in self.replicas))
            async with self._changed:
                self._changed.notify_all()
            await asyncio.sleep(self.poll_interval_s)

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
            answer = await self._client.get(f"{replica.root}/metrics", timeout=5.0)
        except httpx.HTTPError:
            return
        if answer.status_code != 200:
            replica.has_metrics = False
            return
        replica.metrics = parse_vllm_metrics(answer.text)
        replica.has_metrics = bool(replica.metrics)
        if replica.has_metrics:
            replica.limiter.on_metrics(replica.metrics.get("waiting", 0.0), replica.in_flight)

    # -- requests --------------------------------------------------------------------------
    async def _acquire(self) -> Replica:
        async with self._changed:
            while True:
                free = [r for r in self.replicas if r.free]
                if free:
                    replica = min(free, key=lambda r: r.load)
                    replica.in_flight += 1
                    return replica
                if not any(r.healthy for r in self.replicas):
                    self._start_poller()
                await self._changed.wait()

    async def _release(self, replica: Replica) -> None:
        async with self._changed:
            replica.in_flight -= 1
            self._changed.notify(1)

    async def infer(self, request: PageRequest) -> EngineReply:
        """Send one page; raise ``EngineUnavailable`` (retry later) or ``EngineRejected``."""
        replica = await self._acquire()
        started = time.monotonic()
        try:
            answer = await self._client.post(
                f"{replica.url}/chat/completions", json=self._body(request)
            )
            payload = self._check(answer, replica)
        except httpx.TimeoutException as exc:
            raise EngineUnavailable(f"{replica.url} timed out: {type(exc).__name__}") from exc
        except httpx.HTTPError as exc:
            self._note_failure(replica)
            raise EngineUnavailable(f"{replica.url}: {type(exc).__name__}: {exc}") from exc
        finally:
            await self._release(replica)
        replica.failures = 0
        replica.completed += 1
        replica.limiter.on_success()
        return _reply(payload, time.monotonic() - started, self.name)

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
        log.warning("replica %s drained: %s", replica.url, error)

    def _check(self, answer: httpx.Response, replica: Replica) -> dict[str, Any]:
        status = answer.status_code
        if status == 200:
            try:
                return answer.json()
            except ValueError as exc:
                raise EngineUnavailable(f"{replica.url} sent a broken body") from exc
        detail = _error_text(answer)
        if status in (429, 503):
            replica.limiter.on_overload(time.monotonic())
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

    def _body(self, request: PageRequest) -> dict[str, Any]:
        image = base64.b64encode(request.image.data).decode("ascii")
        image_part = {
            "type": "image_url",
            "image_url": {"url": f"data:{request.image.media_type};base64,{image}"},
        }
        parts: list[dict[str, Any]] = [image_part]
        if request.prompt:
            text_part = {"type": "text", "text": request.prompt}
            parts = [image_part, text_part] if request.image_first else [text_part, image_part]
        return {
            "model": self.model,
            "messages": [{"role": "user", "content": parts}],
            "temperature": request.temperature,
            "max_tokens": request.max_tokens,
            **request.extra_body,
        }

    def snapshot(self) -> list[dict[str, Any]]:
        """Per-replica state for logs and status."""
        return [
            {
                "url": r.url,
                "healthy": r.healthy,
                "in_flight": r.in_flight,
                "limit": round(r.limiter.limit, 1),
                "completed": r.completed,
                **r.metrics,
            }
            for r in self.replicas
        ]


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
