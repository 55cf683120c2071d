"""Run ``ocrflow serve`` as a real uvicorn process, a throwaway PostgreSQL cluster, and a
callback receiver, for the job-service tests."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import httpx
import psutil

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
SAMPLE_PDFS = ("born-digital.pdf", "scanned.pdf", "with-blank-page.pdf")
TOKEN_A = "tok-a-" + "0123456789abcdef" * 2
TOKEN_B = "tok-b-" + "fedcba9876543210" * 2


def free_port() -> int:
    """A TCP port nobody listens on right now (127.0.0.1)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@dataclass
class Served:
    """A running ``ocrflow serve``: its URL, process and log."""

    url: str
    proc: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL the server and every process it started (a crash of the machine's
        service, render workers included)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()


def start_serve(root: Path, *args: str, tokens: str = f"{TOKEN_A},{TOKEN_B}") -> Served:
    """Start ``ocrflow serve --root ROOT ARGS`` on a free port; return once /health answers.
    A port taken between the guess and the bind (parallel test workers) is guessed again."""
    root.mkdir(parents=True, exist_ok=True)
    for _ in range(3):
        served = _start_serve_on(free_port(), root, args, tokens)
        if served is not None:
            return served
    raise AssertionError("ocrflow serve found no free port in 3 tries")


def _start_serve_on(port: int, root: Path, args: tuple[str, ...], tokens: str) -> Served | None:
    """The server on ``port`` once it answers; None when another process took the port."""
    log_path = root.parent / f"serve-{port}.log"
    env = {**os.environ, "OCRFLOW_API_TOKENS": tokens}
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ocrflow.cli", "serve", "--root", str(root),
             "--port", str(port), *args],
            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
        )  # fmt: skip
    served = Served(f"http://127.0.0.1:{port}", proc, log_path)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            if "address already in use" in served.log().lower():
                return None
            raise AssertionError(f"ocrflow serve exited {proc.returncode}:\n{served.log()}")
        # Another test's server may hold the port for a while (free_port is only a guess
        # between parallel test workers): /health counts once this process listens on it.
        with contextlib.suppress(httpx.HTTPError):
            if listens(proc, port) and httpx.get(served.url + "/health", timeout=1).is_success:
                return served
        time.sleep(0.1)
    served.kill()
    raise AssertionError(f"ocrflow serve did not answer in time:\n{served.log()}")


def listens(proc: subprocess.Popen[bytes], port: int) -> bool:
    """Whether ``proc`` or one of its children listens on ``port``."""
    try:
        root = psutil.Process(proc.pid)
        family = [root, *root.children(recursive=True)]
        return any(
            c.status == psutil.CONN_LISTEN and c.laddr.port == port
            for member in family
            for c in member.net_connections("tcp")
        )
    except psutil.Error:  # a child that exited meanwhile: ask again
        return False


@contextlib.contextmanager
def serving(root: Path, *args: str, **kwargs: Any) -> Iterator[Served]:
    served = start_serve(root, *args, **kwargs)
    try:
        yield served
    finally:
        served.stop()


def submit_samples(client: httpx.Client, token: str = TOKEN_A, **data: str) -> str:
    """POST the three sample PDFs; return the job id."""
    files = [("files", (n, (EXAMPLES / n).read_bytes(), "application/pdf")) for n in SAMPLE_PDFS]
    response = client.post("/v1/jobs", files=files, data=data, headers=auth(token))
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def wait_status(
    client: httpx.Client, job_id: str, wanted: set[str], token: str = TOKEN_A, timeout: float = 60
) -> dict[str, Any]:
    """Poll the job until its status is in ``wanted``; return its JSON."""
    deadline = time.monotonic() + timeout
    job: dict[str, Any] = {}
    while time.monotonic() < deadline:
        job = client.get(f"/v1/jobs/{job_id}", headers=auth(token)).json()
        if job.get("status") in wanted:
            return job
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} still {job.get('status')} after {timeout} s: {job}")


# -- PostgreSQL --------------------------------------------------------------------------
@dataclass
class Postgres:
    """A throwaway cluster on 127.0.0.1 (trust auth, user ``postgres``)."""

    port: int
    databases: list[str] = field(default_factory=list)

    def new_database(self) -> str:
        """A fresh database; returns its SQLAlchemy URL."""
        import psycopg

        name = "t" + uuid.uuid4().hex[:12]
        dsn = f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres"
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{name}"

    def query(self, url: str, sql: str) -> list[tuple[Any, ...]]:
        import psycopg

        dbname = url.rsplit("/", 1)[1]
        dsn = f"host=127.0.0.1 port={self.port} user=postgres dbname={dbname}"
        with psycopg.connect(dsn) as conn:
            return list(conn.execute(sql).fetchall())


def _as_postgres_user(command: list[str]) -> list[str]:
    # initdb and postgres refuse to run as root.
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *command]
    return command


@contextlib.contextmanager
def postgres_cluster(bin_dir: Path, base: Path) -> Iterator[Postgres]:
    """initdb into ``base``, start on a free port of 127.0.0.1 (socket in ``base``), stop
    and remove at the end."""
    data, sockets = base / "data", base / "sock"
    sockets.mkdir(parents=True)
    if os.geteuid() == 0:
        shutil.chown(base, "postgres")
        shutil.chown(sockets, "postgres")
        base.chmod(0o755)
        for parent in base.parents:  # the tmp folders above must be traversable
            if str(parent).startswith("/tmp/") and parent.stat().st_mode & 0o011 == 0:
                parent.chmod(parent.stat().st_mode | 0o011)
    run = [str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust"]
    subprocess.run(_as_postgres_user(run), check=True, capture_output=True, timeout=120)
    port = free_port()
    options = f"-h 127.0.0.1 -p {port} -k {sockets} -F"
    ctl = [str(bin_dir / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(base / "pg.log")]
    subprocess.run(_as_postgres_user([*ctl, "-w", "start"]), check=True, capture_output=True,
                   timeout=60)  # fmt: skip
    try:
        yield Postgres(port)
    finally:
        stop = [str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"]
        subprocess.run(_as_postgres_user(stop), capture_output=True, timeout=60, check=False)


# -- callbacks -------------------------------------------------------------------------
class CallbackReceiver:
    """A tiny HTTP server on 127.0.0.1 that records the JSON bodies POSTed to it."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        received = self.bodies

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                received.append(json.loads(self.rfile.read(length)))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return None

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> CallbackReceiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
