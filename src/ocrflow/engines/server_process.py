"""One managed ``vllm serve`` process group: launch, readiness, terminate.

Each replica runs in a session of its own, so that signalling the group reaches vLLM's
EngineCore and worker processes too: they outlive a SIGKILLed API server otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import httpx
import psutil

from ocrflow.engines.readiness import ProgressNotes
from ocrflow.engines.server_spec import ServerSpec, build_command, printable_command
from ocrflow.errors import ConfigError, EngineUnavailable

log = logging.getLogger("ocrflow.server")

LOG_TAIL_LINES = 30

ReplicaState = Literal["starting", "ready", "restarting", "down", "stopped"]


def read_log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of a log file ('' when unreadable)."""
    try:
        with path.open("rb") as handle:
            handle.seek(max(0, path.stat().st_size - 64 * 1024))
            data = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(data.splitlines()[-lines:])


def pick_free_ports(host: str, count: int) -> list[int]:
    """``count`` distinct ports free on ``host`` now (held open together so they differ)."""
    with contextlib.ExitStack() as stack:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        socks = [stack.enter_context(socket.socket(family)) for _ in range(count)]
        for sock in socks:
            sock.bind((host, 0))
        return [sock.getsockname()[1] for sock in socks]


def group_alive(pgid: int) -> bool:
    """True while a process of group ``pgid`` runs (zombies awaiting a reaper don't count)."""
    for proc in psutil.process_iter(["status"]):
        with contextlib.suppress(psutil.Error, OSError):
            if proc.info["status"] != psutil.STATUS_ZOMBIE and os.getpgid(proc.pid) == pgid:
                return True
    return False


def signal_group(pgid: int, sig: int) -> None:
    """Send ``sig`` to every process of group ``pgid``; a group already gone is fine."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


@dataclass(eq=False)
class ManagedServer:
    """One replica: a ``vllm serve`` process group on a fixed port, and its log file."""

    index: int
    spec: ServerSpec
    port: int
    log_path: Path
    devices: str | None = None
    live_groups: set[int] = field(default_factory=set)
    proc: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    state: ReplicaState = "starting"
    starts: int = 0
    #: "waiting for vLLM at URL: loading (N s)" first after this long, then every ``_every_s``.
    progress_after_s: float = 5.0
    progress_every_s: float = 15.0

    @property
    def url(self) -> str:
        """The OpenAI base URL of this replica."""
        return f"http://{_url_host(self.spec.host)}:{self.port}/v1"

    @property
    def pid(self) -> int | None:
        """The process id of the ``vllm serve`` process (also its process group id)."""
        return self.proc.pid if self.proc else None

    def exit_code(self) -> int | None:
        """The exit status once the process has ended, else None."""
        return self.proc.poll() if self.proc else None

    def launch(self) -> None:
        """Start the process in a new session, its output appended to the log file."""
        argv = build_command(self.spec, self.port)
        self.starts += 1
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as out:
            note = f"replica {self.index} start {self.starts}: {printable_command(argv)}"
            out.write(f"\n=== ocrflow: {note} (CUDA_VISIBLE_DEVICES={self.devices})\n".encode())
            out.flush()
            try:
                self.proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=self._environment(),
                    start_new_session=True,  # own process group: kill EngineCore with it
                    preexec_fn=_die_with_parent,
                )
            except OSError as exc:
                raise ConfigError(f"cannot run {argv[0]!r}: {exc}") from exc
        self.live_groups.add(self.proc.pid)
        log.info("replica %d: started pid %d: %s", self.index, self.proc.pid, note)

    def _environment(self) -> dict[str, str]:
        env = {**os.environ, **self.spec.env}
        if self.devices is not None:
            env["CUDA_VISIBLE_DEVICES"] = self.devices
        if self.spec.api_key:
            env["VLLM_API_KEY"] = self.spec.api_key
        return env

    async def wait_ready(self, client: httpx.AsyncClient) -> None:
        """Return once the server answers; raise EngineUnavailable on exit or deadline.

        Loading weights takes minutes: a progress line is logged at WARNING (so ``-q``
        shows it) after a few seconds, then every ~15 s.
        """
        started = time.monotonic()
        notes = ProgressNotes(self.progress_after_s, self.progress_every_s)
        while True:
            code = self.exit_code()
            if code is not None:
                raise self._failure(f"exited with status {code} during start-up")
            if await self._answers(client):
                return
            elapsed = time.monotonic() - started
            if elapsed > self.spec.ready_timeout_s:
                raise self._failure(f"not ready after {self.spec.ready_timeout_s:g} s")
            if notes.due(elapsed):
                log.warning("waiting for vLLM at %s: loading (%.0f s)", self.url, elapsed)
            await asyncio.sleep(0.5)

    async def _answers(self, client: httpx.AsyncClient) -> bool:
        """/health is 200 and /v1/models lists the served name (it answers before warm-up)."""
        base = self.url.removesuffix("/v1")
        headers = {"Authorization": f"Bearer {self.spec.api_key}"} if self.spec.api_key else {}
        try:
            health = await client.get(f"{base}/health")
            if health.status_code != 200:
                return False
            models = await client.get(f"{self.url}/models", headers=headers)
            names = {m.get("id") for m in models.json().get("data", [])}
        except (httpx.HTTPError, ValueError, AttributeError):
            return False
        return models.status_code == 200 and self.spec.name in names

    def _failure(self, what: str) -> EngineUnavailable:
        tail = read_log_tail(self.log_path)
        return EngineUnavailable(
            f"vLLM replica {self.index} (port {self.port}) {what}; "
            f"log {self.log_path} ends with:\n{tail}"
        )

    async def terminate(self, grace_s: float) -> None:
        """SIGTERM the whole group, wait up to ``grace_s``, then SIGKILL what is left."""
        if self.proc is None or self.proc.pid not in self.live_groups:
            return  # never signal a group id once ours is gone: the id may be reused
        pgid = self.proc.pid
        signal_group(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while self._group_running(pgid) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        if self._group_running(pgid):
            log.warning("replica %d: still running after %g s; killing", self.index, grace_s)
            signal_group(pgid, signal.SIGKILL)
            while self._group_running(pgid) and time.monotonic() < deadline + 5:
                await asyncio.sleep(0.1)
        self.live_groups.discard(pgid)

    def _group_running(self, pgid: int) -> bool:
        assert self.proc is not None
        self.proc.poll()  # reap our own child so that it no longer counts
        return group_alive(pgid)

    def kill(self) -> None:
        """SIGKILL the group at once, without waiting (for interpreter exit paths)."""
        if self.proc is not None and self.proc.pid in self.live_groups:
            signal_group(self.proc.pid, signal.SIGKILL)
            self.live_groups.discard(self.proc.pid)


def _url_host(host: str) -> str:
    """The host to connect to: a wildcard bind address is reached on loopback."""
    if host in ("0.0.0.0", "::", ""):
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host


@dataclass(frozen=True, slots=True)
class ReplicaStatus:
    """A snapshot of one replica, for status displays."""

    index: int
    url: str
    pid: int | None
    state: ReplicaState
    restarts: int
    log_path: Path


def _die_with_parent() -> None:
    """In the child before exec: ask Linux to send SIGTERM when ocrflow dies, even by
    SIGKILL, so a killed run never leaves a vLLM server holding a GPU. (Launches happen on
    the event loop's thread, which lives as long as ocrflow.)"""
    if sys.platform != "linux":
        return
    import ctypes

    pr_set_pdeathsig = 1
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
