"""Launch and watch local vLLM servers: one replica per GPU, restarts, no orphans.

Example::

    spec = ServerSpec(model="allenai/olmOCR-2-7B-1025-FP8", served_model_name="olmocr",
                      flags=recipe.server_flags + user_flags, gpus=("0", "1"),
                      log_dir=workspace_logs)
    async with ManagedServers(spec) as servers:      # every replica ready, watcher running
        engine = OpenAIEngine(servers.urls, ...)     # "http://127.0.0.1:P/v1" each

This module knows no recipes: it runs ``vllm serve MODEL`` with the flags it is given,
verbatim, after the ones it owns (``--host``, ``--port``, ``--served-model-name``). Put
user flags after recipe flags: vLLM's parser keeps the last value of a repeated option.
The command line lives in ``server_spec.py``, one replica's process in
``server_process.py``; this module owns the set: start, watch, restart, stop.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import tempfile
import weakref
from collections.abc import Coroutine
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from ocrflow.engines.server_process import (
    ManagedServer,
    ReplicaStatus,
    pick_free_ports,
    read_log_tail,
    signal_group,
)
from ocrflow.engines.server_spec import (
    ServerSpec,
    build_command,
    data_parallel_size,
    printable_command,
    replica_devices,
)
from ocrflow.errors import ConfigError, OcrflowError

__all__ = [
    "ManagedServer",
    "ManagedServers",
    "ReplicaStatus",
    "ServerSpec",
    "build_command",
    "data_parallel_size",
    "printable_command",
    "replica_devices",
]

log = logging.getLogger("ocrflow.server")


def _kill_groups(pgids: set[int], owner_pid: int) -> None:
    """Safety net (finalizer / interpreter exit): SIGKILL every group still recorded."""
    if os.getpid() != owner_pid:  # a forked child inherited the set: not its servers
        return
    for pgid in list(pgids):
        signal_group(pgid, signal.SIGKILL)
    pgids.clear()


class ManagedServers:
    """Every replica of one spec: start, wait ready, watch and restart, stop.

    Use as an async context manager; ``stop()`` runs on exit, on error and on
    cancellation (Ctrl-C), and a finalizer SIGKILLs the groups if the loop dies first.
    """

    def __init__(
        self,
        spec: ServerSpec,
        *,
        poll_interval_s: float = 1.0,
        stop_timeout_s: float = 30.0,
        restart_delay_s: float = 2.0,
        progress_s: tuple[float, float] = (5.0, 15.0),
    ) -> None:
        self.spec = spec
        self.poll_interval_s = poll_interval_s
        self.stop_timeout_s = stop_timeout_s
        self.restart_delay_s = restart_delay_s
        #: While a replica loads: first progress line after, then every, so many seconds.
        self.progress_s = progress_s
        self._replicas: list[ManagedServer] = []
        self._groups: set[int] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._client: httpx.AsyncClient | None = None
        self._stopping: asyncio.Task[None] | None = None
        self._finalizer = weakref.finalize(self, _kill_groups, self._groups, os.getpid())

    @property
    def replicas(self) -> list[ManagedServer]:
        """The replicas, in ``gpus`` order."""
        return list(self._replicas)

    @property
    def urls(self) -> list[str]:
        """Base URLs of every replica ("http://127.0.0.1:P/v1"), ready or not."""
        return [r.url for r in self._replicas]

    @property
    def ready_urls(self) -> list[str]:
        """Base URLs of the replicas that are ready now."""
        return [r.url for r in self._replicas if r.state == "ready"]

    @property
    def restarts(self) -> dict[int, int]:
        """Restarts so far, by replica index."""
        return {r.index: r.restarts for r in self._replicas}

    @property
    def log_paths(self) -> list[Path]:
        """One log file per replica."""
        return [r.log_path for r in self._replicas]

    def status(self) -> list[ReplicaStatus]:
        """A snapshot of every replica."""
        return [
            ReplicaStatus(r.index, r.url, r.pid, r.state, r.restarts, r.log_path)
            for r in self._replicas
        ]

    async def start(self) -> list[str]:
        """Launch every replica and return their URLs once all are ready; then watch them.

        Raises EngineUnavailable (with the log tail) when a replica exits during start-up
        or misses the deadline; every replica is stopped first.
        """
        try:
            self.launch()
        except BaseException:  # a later replica failed to launch: stop the earlier ones
            await self.stop_or_kill()
            raise
        await self.wait_ready()
        return self.urls

    def launch(self) -> list[str]:
        """Start every replica's process and return their URLs at once (not ready yet:
        ``wait_ready``). The caller owns the processes from here: ``stop_or_kill`` them."""
        if self._replicas:
            raise ConfigError("these vLLM servers were started already")
        self._client = httpx.AsyncClient(timeout=httpx.Timeout(5.0, connect=2.0))
        self._replicas = self._plan()
        for replica in self._replicas:
            replica.launch()
        return self.urls

    async def wait_ready(self) -> None:
        """Wait until every launched replica is ready, then watch them (restarts).

        Raises EngineUnavailable (with the log tail) when a replica exits during start-up
        or misses the deadline; every replica is stopped first.
        """
        assert self._client is not None, "launch() first"
        try:
            await self._wait_all_ready(self._client)
        except BaseException:
            await self.stop_or_kill()
            raise
        for replica in self._replicas:
            replica.state = "ready"
        self._spawn(self._watch())
        log.info("vLLM ready: %s", ", ".join(self.urls))

    async def _wait_all_ready(self, client: httpx.AsyncClient) -> None:
        """Wait for every replica; on the first failure, stop waiting for the others."""
        tasks = [asyncio.create_task(r.wait_ready(client)) for r in self._replicas]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        finally:
            for task in tasks:
                task.cancel()
        errors = [t.exception() for t in tasks if t.done() and not t.cancelled()]
        for error in errors:
            if error is not None:
                raise error

    def _plan(self) -> list[ManagedServer]:
        devices = replica_devices(self.spec)
        if self.spec.base_port:
            ports = [self.spec.base_port + i for i in range(len(devices))]
        else:
            ports = pick_free_ports(self.spec.host, len(devices))
        log_dir = Path(self.spec.log_dir or tempfile.mkdtemp(prefix="ocrflow-vllm-"))
        after_s, every_s = self.progress_s
        return [
            ManagedServer(
                i,
                self.spec,
                port,
                log_dir / f"vllm-{i}.log",
                dev,
                self._groups,
                progress_after_s=after_s,
                progress_every_s=every_s,
            )
            for i, (port, dev) in enumerate(zip(ports, devices, strict=True))
        ]

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("vLLM watcher failed", exc_info=task.exception())

    async def _watch(self) -> None:
        """Poll the processes; an unexpected exit starts a recovery for that replica."""
        while True:
            await asyncio.sleep(self.poll_interval_s)
            for replica in self._replicas:
                code = replica.exit_code()
                if replica.state == "ready" and code is not None:
                    log.warning(
                        "replica %d: exited with status %s; log %s ends with:\n%s",
                        replica.index, code, replica.log_path, read_log_tail(replica.log_path, 10),
                    )  # fmt: skip
                    replica.state = "restarting"
                    self._spawn(self._recover(replica))

    async def _recover(self, replica: ManagedServer) -> None:
        """Restart ``replica`` until it is ready or its restart budget is spent."""
        assert self._client is not None
        while replica.restarts < self.spec.max_restarts:
            replica.restarts += 1
            await replica.terminate(grace_s=5.0)  # orphaned EngineCore / workers
            await asyncio.sleep(self.restart_delay_s)
            log.warning("replica %d: restart %d of %d", replica.index, replica.restarts,
                        self.spec.max_restarts)  # fmt: skip
            try:
                replica.launch()
                await replica.wait_ready(self._client)
            except OcrflowError as exc:
                log.warning("replica %d: restart failed: %s", replica.index, exc)
                continue
            replica.state = "ready"
            log.info("replica %d: ready again at %s", replica.index, replica.url)
            return
        await replica.terminate(grace_s=5.0)
        replica.state = "down"
        log.error("replica %d: down after %d restarts; log %s", replica.index,
                  replica.restarts, replica.log_path)  # fmt: skip

    async def stop(self) -> None:
        """Stop watching, then terminate every replica's process group. Idempotent."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await asyncio.gather(*(r.terminate(self.stop_timeout_s) for r in self._replicas))
        for replica in self._replicas:
            replica.state = "stopped"
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def begin_stop(self) -> None:
        """Start stopping in the background, for a caller that is done with the servers but
        has other work left (writing outputs): ``stop_or_kill`` then waits for it."""
        if self._stopping is None:
            self._stopping = asyncio.get_running_loop().create_task(self.stop())

    async def stop_or_kill(self) -> None:
        """Stop (once: a ``begin_stop`` already running is waited for); SIGKILL if this
        await is cancelled."""
        self.begin_stop()
        assert self._stopping is not None
        try:
            await asyncio.shield(self._stopping)
        except BaseException:
            self.kill()
            raise

    def kill(self) -> None:
        """SIGKILL every replica's group now (synchronous; for exit paths)."""
        for task in list(self._tasks):
            task.cancel()
        for replica in self._replicas:
            replica.kill()
            replica.state = "stopped"

    async def __aenter__(self) -> ManagedServers:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop_or_kill()
