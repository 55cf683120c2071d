"""Long-lived resources of the service's worker slots, shared by their slices of work.

A slot works on a job in short slices (fair share), each one a call of the ordinary worker
loop. Starting render processes and opening the engine (a new HTTP client, readiness
checks, for ``--engine vllm`` a whole server) at every slice cost more than the pages of a
small job, and blocked the workers' event loop while they ran; so engines are opened once
per distinct engine configuration and process, and each slot keeps its render processes.

An engine that cannot be opened (its server down, a wrong model, a bad configuration) is
tried again after a growing pause, a few times, and then its job fails (``StartRetries``):
never a retry every poll, never a job queued forever.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

from ocrflow.config import EngineOptions, RenderOptions
from ocrflow.errors import (
    ConfigError,
    EngineAuthError,
    EngineUnavailable,
    EngineUnreachable,
    ModelNotServed,
    OcrflowError,
)
from ocrflow.observe.metrics import Metrics
from ocrflow.readers.session import EngineSession, api_key, open_engine
from ocrflow.render.pool import RenderPool

if TYPE_CHECKING:
    from ocrflow.recipes.base import Recipe

log = logging.getLogger("ocrflow.service")

#: Opened engines kept while no slot uses them (jobs may choose their own recipe or model).
IDLE_ENGINES_KEPT = 4
#: The longest pause between two attempts at opening a job's engine, seconds.
MAX_START_DELAY_S = 30.0
#: What a client is told about an engine that would not open (never the server's address).
_CAUSES: tuple[tuple[type[BaseException], str], ...] = (
    (EngineUnreachable, "no OCR server could be reached"),
    (EngineAuthError, "the OCR server refused the service's API key"),
    (ModelNotServed, "the OCR server does not serve the model"),
    (EngineUnavailable, "the OCR server did not become ready"),
    (ConfigError, "the engine is not configured correctly"),
)


class EngineStartError(OcrflowError):
    """The engine of a job's run could not be opened (``__cause__`` says why)."""

    reason = "engine_error"


def start_failure_message(cause: BaseException, attempts: int) -> str:
    """A job's failure message for an engine that never opened: what went wrong in words
    and the error's type, without its text (which may name internal hosts)."""
    what = next((text for kind, text in _CAUSES if isinstance(cause, kind)), "it failed")
    plural = "s" if attempts != 1 else ""
    return (
        f"the OCR engine could not be opened ({attempts} attempt{plural}): "
        f"{what} ({type(cause).__name__})"
    )


class StartRetries:
    """When each job may try again (to open its engine, or after any failed slice): after
    ``first_delay_s``, then twice as long each time (at most ``MAX_START_DELAY_S``),
    ``attempts`` tries in all (``None``: no end)."""

    def __init__(self, attempts: int | None, first_delay_s: float) -> None:
        self.attempts = max(1, attempts) if attempts is not None else None
        self.first_delay_s = first_delay_s
        #: ``{job id: (failed attempts, monotonic time of the next one)}``
        self._failed: dict[str, tuple[int, float]] = {}

    def waiting(self, job_id: str, now: float) -> bool:
        """The job failed to open its engine lately and its pause is not over."""
        entry = self._failed.get(job_id)
        return entry is not None and entry[1] > now

    def failed(self, job_id: str, now: float) -> tuple[int, float | None]:
        """Count a failed attempt: ``(attempts so far, seconds until the next)``, or
        ``(attempts, None)`` when there is none left (the job is then forgotten)."""
        count = self._failed.get(job_id, (0, 0.0))[0] + 1
        if self.attempts is not None and count >= self.attempts:
            self._failed.pop(job_id, None)
            return count, None
        delay = min(self.first_delay_s * 2 ** (count - 1), MAX_START_DELAY_S)
        self._failed[job_id] = (count, now + delay)
        return count, delay

    def succeeded(self, job_id: str) -> None:
        """The engine opened: the job starts from a clean slate."""
        self._failed.pop(job_id, None)

    def keep_only(self, job_ids: set[str]) -> None:
        """Forget jobs that are no longer runnable (cancelled, given up, finished)."""
        for job_id in set(self._failed) - job_ids:
            del self._failed[job_id]

    def __bool__(self) -> bool:
        return bool(self._failed)


class _HeldEngine:
    """One opened engine, held open by its own task until told to stop (the engine's
    context is entered and left in that one task)."""

    def __init__(self, options: EngineOptions, log_dir: str | None, metrics: Metrics | None):
        loop = asyncio.get_running_loop()
        self.ready: asyncio.Future[EngineSession] = loop.create_future()
        self.users = 0
        self.last_used = time.monotonic()
        self._stop = asyncio.Event()
        self.task = loop.create_task(self._hold(options, log_dir, metrics))

    @property
    def failed(self) -> bool:
        """Opening failed (or was cancelled): the next slice opens it again."""
        return self.ready.done() and (self.ready.cancelled() or self.ready.exception() is not None)

    @property
    def healthy(self) -> bool:
        """Not known to be unusable: open, and (an HTTP engine) with a healthy server."""
        if self.failed:
            return False
        if not self.ready.done():
            return True
        engine = self.ready.result().engine
        replicas = getattr(getattr(engine, "wrapped", engine), "replicas", None)
        return replicas is None or any(r.healthy for r in replicas)

    def stop(self) -> None:
        """Close the engine (at once if it is still opening)."""
        self._stop.set()
        if not self.ready.done():
            self.task.cancel()

    async def _hold(
        self, options: EngineOptions, log_dir: str | None, metrics: Metrics | None
    ) -> None:
        try:
            if log_dir is not None:  # where a managed vLLM server writes its log
                Path(log_dir).mkdir(parents=True, exist_ok=True)
            async with open_engine(options, log_dir=log_dir) as session:
                watched = None
                if metrics is not None:
                    watched = metrics.instrument(session.engine)
                    session = dataclasses.replace(session, engine=watched)
                self.ready.set_result(session)
                try:
                    await self._stop.wait()
                finally:
                    if watched is not None and metrics is not None:
                        metrics.engines.unwatch(watched)
        except asyncio.CancelledError:
            if not self.ready.done():
                self.ready.cancel()
            raise
        except Exception as exc:  # each slice that waits for it reports it
            if not self.ready.done():
                self.ready.set_exception(exc)
            else:
                log.warning("closing an engine failed: %s: %s", type(exc).__name__, exc)


class EngineCache:
    """Opened engines, one per distinct engine configuration, shared by every slot."""

    def __init__(
        self, *, log_dir: str | None = None, metrics: Metrics | None = None,
        keep_idle: int = IDLE_ENGINES_KEPT,
    ) -> None:  # fmt: skip
        self.log_dir = log_dir
        self.metrics = metrics
        self.keep_idle = keep_idle
        self._held: dict[str, _HeldEngine] = {}
        self._closing: set[asyncio.Task[None]] = set()

    @contextlib.asynccontextmanager
    async def session(self, options: EngineOptions) -> AsyncIterator[EngineSession]:
        """The opened engine for ``options`` (opened now if none is); raises what opening it
        raised. Cancelling the caller does not cancel an opening others wait for."""
        key = _engine_key(options)
        held = self._held.get(key)
        if held is not None and held.users == 0 and not held.healthy:
            # Its servers went away while no slot used it: open it again, so that the slice
            # waits for them as a fresh one would (readiness checks), then gives up.
            self._release(key)
            held = None
        if held is None or held.failed:
            held = _HeldEngine(options, self.log_dir, self.metrics)
            self._held[key] = held
        held.users += 1
        try:
            session = await asyncio.shield(held.ready)
            yield _with_job_recipe(session, options)
        finally:
            held.users -= 1
            held.last_used = time.monotonic()
            self._trim()

    def _trim(self) -> None:
        """Close failed engines and the least recently used idle ones beyond ``keep_idle``."""
        for key, held in list(self._held.items()):
            if held.failed and held.users == 0:
                self._release(key)
        idle = sorted((h.last_used, k) for k, h in self._held.items() if h.users == 0)
        for _, key in idle[: max(0, len(idle) - self.keep_idle)]:
            self._release(key)

    def _release(self, key: str) -> None:
        held = self._held.pop(key)
        held.stop()
        self._closing.add(held.task)
        held.task.add_done_callback(self._closing.discard)

    async def aclose(self) -> None:
        """Close every engine (waits for them to be closed)."""
        for key in list(self._held):
            self._release(key)
        tasks = list(self._closing)
        await asyncio.gather(*tasks, return_exceptions=True)


#: Engine settings a job may vary that change how its pages are asked for and read, never
#: which server answers: jobs that differ only in these share one opened engine (and, for
#: ``--engine vllm``, one server). Otherwise a job could start a vLLM per ``max_tokens``.
PER_JOB_FIELDS = ("recipe_options", "max_page_error_rate")


def _engine_key(options: EngineOptions) -> str:
    """Equal for options that open the same engine (the API key, dumped masked, by hash);
    for a VLM, the recipe's server flags stand for its per-job options."""
    secret = api_key(options) or ""
    digest = hashlib.sha256(secret.encode()).hexdigest()[:16]
    shared = options
    if options.kind in {"openai", "vllm"}:
        flags = getattr(_job_recipe(options), "server_flags", ())
        blank = {name: EngineOptions.model_fields[name].get_default(call_default_factory=True)
                 for name in PER_JOB_FIELDS}  # fmt: skip
        shared = options.model_copy(update=blank)
        return f"{shared.model_dump_json()}|{list(flags)}|{digest}"
    return f"{shared.model_dump_json()}|{digest}"


def _job_recipe(options: EngineOptions) -> Recipe:
    from ocrflow.recipes.registry import recipe_for_model

    return recipe_for_model(
        options.model or "", options.recipe, guided=options.guided, **options.recipe_options
    )


def _with_job_recipe(session: EngineSession, options: EngineOptions) -> EngineSession:
    """The shared session with this job's own recipe (its per-job options applied)."""
    if session.recipe is None or options.kind not in {"openai", "vllm"}:
        return session
    recipe = _job_recipe(options)
    return dataclasses.replace(session, recipe=recipe, target_dim=recipe.target_dim)


class SlotPool:
    """One slot's render processes, kept across its slices; started again only when a job
    asks for other render settings, or after a slice failed (the pool may be broken)."""

    def __init__(self) -> None:
        self._pool: RenderPool | None = None
        self._key: tuple[int, float, int] | None = None

    async def get(self, render: RenderOptions) -> RenderPool:
        """A running pool for ``render``'s workers, page timeout and memory cap."""
        key = (render.workers, render.page_timeout_s, render.worker_memory_mb)
        if self._pool is not None and key != self._key:
            await self.discard()
        if self._pool is None:
            self._pool = RenderPool(
                render.workers, page_timeout_s=render.page_timeout_s,
                memory_mb=render.worker_memory_mb,
            )  # fmt: skip
            self._key = key
        return self._pool

    async def discard(self) -> None:
        """Stop the processes (off the event loop: stopping waits for them)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            await asyncio.to_thread(pool.close)

    def close(self) -> None:
        """Stop the processes now (at the slot's end, when waiting elsewhere is no option)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()
