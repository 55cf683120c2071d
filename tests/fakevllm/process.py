"""Start and stop a fakevllm server process for tests and benchmarks.

Example::

    with running_server("--pages-per-s", "40", "--fail-429", "0.1") as server:
        client = openai_like_client(base_url=server.base_url)
        ...
        print(server.stats()["outcomes"])
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

REPO_ROOT = Path(__file__).resolve().parents[2]
LISTENING_PREFIX = "LISTENING "


#: Flags of a quick server: 20-token pages, a few milliseconds a step.
FAST = ("--pages-per-s", "2000", "--tokens-per-page", "20", "--max-num-seqs", "16")


class ServerStartError(RuntimeError):
    """The server process exited or did not print its LISTENING line in time."""


@dataclass
class ServerHandle:
    """A running fakevllm process: its URLs, the process, and helpers to query it."""

    url: str
    proc: subprocess.Popen[str]
    log_path: Path

    @property
    def base_url(self) -> str:
        """The OpenAI base URL (``http://127.0.0.1:PORT/v1``)."""
        return self.url + "/v1"

    @property
    def port(self) -> int:
        """The TCP port the server listens on."""
        return int(self.url.rsplit(":", 1)[1])

    @property
    def pid(self) -> int:
        """The server's process id."""
        return self.proc.pid

    def alive(self) -> bool:
        """True while the process runs."""
        return self.proc.poll() is None

    def _get(self, path: str, timeout: float) -> httpx.Response:
        """GET a server path (short timeout, no pooling)."""
        response = httpx.get(self.url + path, timeout=timeout)
        response.raise_for_status()
        return response

    def stats(self, timeout: float = 5.0) -> dict[str, Any]:
        """The server's ``/stats`` JSON (outcomes, image hash -> count, engine counters)."""
        return self._get("/stats", timeout).json()

    def metrics(self, timeout: float = 5.0) -> str:
        """The server's ``/metrics`` text."""
        return self._get("/metrics", timeout).text

    def set_faults(self, timeout: float = 5.0, **settings: float) -> dict[str, float]:
        """Change fault settings at run time, e.g. ``set_faults(fail_500=0.2, slow_s=1)``."""
        response = httpx.post(self.url + "/admin/faults", json=settings, timeout=timeout)
        response.raise_for_status()
        return response.json()

    def cpu_seconds(self) -> float:
        """User+system CPU seconds the server process has used (from /proc, Linux)."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = int(fields[11]) + int(fields[12])
        return ticks / os.sysconf("SC_CLK_TCK")

    def log(self) -> str:
        """Everything the server wrote to stderr so far."""
        return self.log_path.read_text(errors="replace")


def _read_listening_line(proc: subprocess.Popen[str], timeout: float) -> str:
    """Wait for the ``LISTENING url`` line on the server's stdout; return the URL."""
    lines: queue.Queue[str] = queue.Queue()
    assert proc.stdout is not None
    stdout = proc.stdout
    reader = threading.Thread(target=lambda: lines.put(stdout.readline()), daemon=True)
    reader.start()
    try:
        line = lines.get(timeout=timeout)
    except queue.Empty:
        raise ServerStartError(f"no LISTENING line within {timeout} s") from None
    if not line.startswith(LISTENING_PREFIX):
        raise ServerStartError(f"unexpected first line {line!r} (exit code {proc.poll()})")
    return line[len(LISTENING_PREFIX) :].strip()


def _stop(proc: subprocess.Popen[str], grace_s: float) -> None:
    """Terminate the process; kill it if it has not exited after ``grace_s``."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(grace_s)
    if proc.stdout is not None:
        proc.stdout.close()


@contextmanager
def running_server(
    *flags: str | int | float,
    startup_timeout: float = 20.0,
    stop_grace_s: float = 5.0,
    env: dict[str, str] | None = None,
) -> Iterator[ServerHandle]:
    """Run ``python -m tests.fakevllm.server --port 0 *flags`` for the ``with`` block.

    Yields a :class:`ServerHandle` once the server printed its LISTENING line; on exit
    terminates the process (SIGTERM, then SIGKILL after ``stop_grace_s``). Its stderr is
    kept in a temporary file (``handle.log()``) and shown in the error if start-up fails.
    """
    args = [sys.executable, "-m", "tests.fakevllm.server", "--port", "0", *map(str, flags)]
    child_env = dict(os.environ if env is None else env)
    child_env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO_ROOT), child_env.get("PYTHONPATH", "")) if p
    )
    log_fd, log_name = tempfile.mkstemp(prefix="fakevllm-", suffix=".log")
    log_path = Path(log_name)
    try:
        with os.fdopen(log_fd, "w") as log_file:
            proc = subprocess.Popen(
                args,
                cwd=REPO_ROOT,
                env=child_env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=log_file,
                text=True,
            )
        try:
            try:
                url = _read_listening_line(proc, startup_timeout)
            except ServerStartError as exc:
                raise ServerStartError(
                    f"{exc}\n--- server stderr ---\n{log_path.read_text()}"
                ) from None
            yield ServerHandle(url=url, proc=proc, log_path=log_path)
        finally:
            _stop(proc, stop_grace_s)
    finally:
        log_path.unlink(missing_ok=True)
