"""Open the configured engine for a run, and close everything it started afterwards."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ocrflow.config import EngineOptions
from ocrflow.config.environment import environment_api_key
from ocrflow.engines.base import Engine
from ocrflow.engines.completions import v1
from ocrflow.engines.embedded import EmbeddedEngine
from ocrflow.engines.factory import build_engine
from ocrflow.engines.presets import preset_flags
from ocrflow.engines.readiness import confirm_models
from ocrflow.errors import ConfigError

if TYPE_CHECKING:
    from ocrflow.engines.openai import OpenAIEngine
    from ocrflow.engines.server import ManagedServers
    from ocrflow.recipes.base import Recipe

log = logging.getLogger("ocrflow.engine")


@dataclass(frozen=True, slots=True)
class EngineSession:
    """The engine a run reads pages with, plus its recipe when it is a VLM."""

    engine: Engine
    recipe: Recipe | None
    label: str
    #: The page size this engine reads best at, unless the user chose one.
    target_dim: int
    #: A CPU engine reads at a resolution instead: born-digital pages at ``dpi``, scans at
    #: their own, at most ``max_scan_dpi`` (``render/resolution.py``).
    dpi: float | None = None
    max_scan_dpi: float | None = None
    #: Set when the session was opened with ``ready_later``: done once the engine serves
    #: (its servers started and answered), or failed with why it never will.
    ready: asyncio.Task[None] | None = None
    #: Stop what the session started (servers) in the background, once no page is left to
    #: send: they stop while the outputs are written. The session's exit waits for it.
    wind_down: Callable[[], Awaitable[None]] | None = None


def api_key(options: EngineOptions) -> str | None:
    """The key from ``--api-key``, else the environment's (in the order
    ``ocrflow.config.builder`` documents); never logged."""
    if options.api_key is not None:
        return options.api_key.get_secret_value()
    return environment_api_key()


@contextlib.asynccontextmanager
async def open_engine(
    options: EngineOptions, *, log_dir: str | None, ready_later: bool = False
) -> AsyncIterator[EngineSession]:
    """Yield a ready engine; on exit close it and stop any server it started.

    ``ready_later``: yield at once, while the servers start and the engine waits for them
    in ``session.ready``, so that the caller renders its first pages meanwhile (a managed
    vLLM takes minutes to load). The caller must not send a page before ``ready`` is done,
    and must stop when it fails (``executors.worker`` does both).
    """
    if options.kind in {"embedded", "tesseract"}:
        engine = build_engine(options)
        if isinstance(engine, EmbeddedEngine):
            engine.preload()
        try:
            yield EngineSession(
                engine,
                None,
                engine.name,
                _default_dim(engine),
                dpi=getattr(engine, "reading_dpi", None),
                max_scan_dpi=getattr(engine, "max_scan_dpi", None),
            )
        finally:
            await engine.aclose()
        return
    if not options.model:
        raise ConfigError(f"--engine {options.kind} needs --model")
    from ocrflow.recipes.registry import recipe_for_model

    recipe = recipe_for_model(
        options.model, options.recipe, guided=options.guided, **options.recipe_options
    )
    async with contextlib.AsyncExitStack() as stack:
        managed = None
        servers = list(options.servers)
        if options.kind == "vllm":
            managed = await stack.enter_async_context(_managed(options, recipe, log_dir))
            servers = managed.urls
        elif not servers:
            raise ConfigError("--engine openai needs --server URL (repeatable)")
        engine = _openai(options, servers)
        stack.push_async_callback(engine.aclose)
        session = EngineSession(
            engine,
            recipe,
            f"{options.kind}:{options.model}",
            recipe.target_dim,
            wind_down=None if managed is None else functools.partial(_wind_down, engine, managed),
        )
        becoming_ready = _become_ready(options, engine, servers, managed)
        if not ready_later:
            await becoming_ready
            yield session
            return
        ready = asyncio.get_running_loop().create_task(becoming_ready)
        stack.push_async_callback(_cancel, ready)
        yield dataclasses.replace(session, ready=ready)


async def _become_ready(
    options: EngineOptions,
    engine: OpenAIEngine,
    servers: list[str],
    managed: ManagedServers | None,
) -> None:
    """Wait for servers we started, then for the engine to see its model served."""
    if managed is not None:
        await managed.wait_ready()
    await engine.wait_ready(options.ready_timeout_s, unreachable_s=options.unreachable_timeout_s)
    if len(servers) > 1:  # one replica ready: none of the others serves another model
        model = options.served_model_name or options.model or ""
        await confirm_models([v1(s) for s in servers], model, api_key=api_key(options))


async def _wind_down(engine: OpenAIEngine, managed: ManagedServers) -> None:
    await engine.aclose()  # no more polls of servers that are going away
    managed.begin_stop()


async def _cancel(task: asyncio.Task[None]) -> None:
    """Cancel a start nobody waits for any more (its error, if any, was raised already);
    a cancellation of the caller itself still goes through."""
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


def _default_dim(engine: Engine) -> int:
    return int(getattr(engine, "default_target_dim", 1288))


def _openai(options: EngineOptions, servers: list[str]) -> OpenAIEngine:
    from ocrflow.engines.breaker import BreakerPolicy
    from ocrflow.engines.openai import OpenAIEngine

    return OpenAIEngine(
        servers,
        options.served_model_name or options.model or "",
        api_key=api_key(options),
        max_concurrency=options.max_concurrency,
        request_timeout_s=options.request_timeout_s,
        breaker=BreakerPolicy(fail_after_s=_fail_after(options)),
        logprobs=options.logprobs,
    )


def _fail_after(options: EngineOptions) -> float:
    """How long every server may fail before the run stops: for servers we start, at
    least their ``--ready-timeout`` (a crashed one is restarted, and loads that long)."""
    if options.kind == "vllm" and options.fail_after_s > 0:
        return max(options.fail_after_s, options.ready_timeout_s)
    return options.fail_after_s


def managed_flags(recipe: object, options: EngineOptions) -> tuple[str, ...]:
    """``vllm serve`` flags: the recipe's, then its preset's (``--preset``, else the
    recipe's ``gpu_preset`` when GPUs are named), then the user's ``--vllm-arg`` (last one
    wins). A preset leaves out flags the server can be told in advance to refuse."""
    recipe_flags = tuple(getattr(recipe, "server_flags", ()))
    name = options.preset or (getattr(recipe, "gpu_preset", None) if options.gpus else None)
    added = preset_flags(
        name,
        model=options.model or "",
        gpus=options.gpus,
        flags=(*recipe_flags, *options.server_flags),
    )
    return (*recipe_flags, *added, *options.server_flags)


@contextlib.asynccontextmanager
async def _managed(
    options: EngineOptions, recipe: object, log_dir: str | None
) -> AsyncIterator[ManagedServers]:
    """Launched servers (not yet ready: ``wait_ready``), stopped on exit."""
    from ocrflow.engines.server import ManagedServers, ServerSpec

    spec = ServerSpec(
        model=options.model or "",
        served_model_name=options.served_model_name or options.model,
        flags=managed_flags(recipe, options),
        gpus=options.gpus,
        command=options.vllm_command,
        log_dir=log_dir,
        ready_timeout_s=options.ready_timeout_s,
        api_key=api_key(options),
    )
    servers = ManagedServers(spec)
    try:
        servers.launch()
        yield servers
    finally:
        await servers.stop_or_kill()
