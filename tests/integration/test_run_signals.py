"""Ctrl-C and SIGTERM stop a real ``ocrflow run`` within seconds whatever it is doing —
hashing a file that takes minutes to read, waiting on an engine that never answers — with
exit 130 (SIGINT) or 143 (SIGTERM), no traceback, no process left behind; the same command
then resumes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.fakevllm.process import running_server

from .vlm_helpers import MODEL, vlm_args

pytestmark = pytest.mark.slow

#: What "within a few seconds" means here: the run's own grace is 5 s.
STOP_BOUND_S = 10.0
SERVER = ("--reply-format", "olmocr", "--model", MODEL, "--pages-per-s", "40")


def _start(*args: str) -> subprocess.Popen[str]:
    """``ocrflow run ARGS`` in its own process group, as a shell runs a command."""
    return subprocess.Popen(
        [sys.executable, "-m", "ocrflow.cli", "run", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip


def _wait_for(proc: subprocess.Popen[str], ready: Path | None, seconds: float) -> None:
    """Let the run get going: until ``ready`` exists (or ``seconds`` passed)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and proc.poll() is None:
        if ready is not None and ready.exists():
            return
        time.sleep(0.1)
    assert proc.poll() is None, proc.communicate()


def _stop(proc: subprocess.Popen[str], sig: int, *, group: bool) -> tuple[int, float, str]:
    """Send ``sig`` (to the whole group, as a terminal's Ctrl-C does, or to the process,
    as ``kill`` does); return the exit code, the seconds it took and stderr."""
    family = [proc.pid, *(c.pid for c in psutil.Process(proc.pid).children(recursive=True))]
    sent = time.monotonic()
    if group:
        os.killpg(proc.pid, sig)
    else:
        proc.send_signal(sig)
    try:
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    took = time.monotonic() - sent
    time.sleep(0.5)
    alive = [p for p in family if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"]
    assert not alive, f"processes left behind: {alive}"
    return proc.returncode, took, stderr


@pytest.fixture
def endless(tmp_path: Path) -> Path:
    """A folder holding a 64 GB sparse file named like a PDF: hashing it takes minutes."""
    folder = tmp_path / "in"
    folder.mkdir()
    with open(folder / "huge.pdf", "wb") as handle:
        handle.truncate(64 << 30)
    return folder


@pytest.mark.parametrize(
    ("sig", "group", "code"),
    [(signal.SIGINT, True, 130), (signal.SIGTERM, False, 143)],
    ids=["ctrl-c", "sigterm"],
)
def test_a_signal_stops_a_run_that_is_hashing(
    endless: Path, tmp_path: Path, sig: int, group: bool, code: int
) -> None:
    out = tmp_path / "out"
    proc = _start(str(endless), "-o", str(out))
    _wait_for(proc, out / ".ocrflow" / "manifest", 30)  # planned: the worker hashes now
    time.sleep(1.0)
    returncode, took, stderr = _stop(proc, sig, group=group)
    assert returncode == code, stderr
    assert took < STOP_BOUND_S, took
    assert "Traceback" not in stderr and "run the same command again" in stderr


def test_sigterm_while_the_engine_never_answers_then_resume(tmp_path: Path) -> None:
    from make_examples import text_pdf

    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(3):
        (folder / f"doc{i}.pdf").write_bytes(text_pdf([[f"Document {i}", "", "Some words."]]))
    out = tmp_path / "out"
    with running_server(*SERVER, "--hang", "1", "--hang-s", "600") as hanging:
        proc = _start(str(folder), "-o", str(out), *vlm_args(hanging.base_url))
        _wait_for(proc, None, 6)  # the pages are at the server, which keeps them
        returncode, took, stderr = _stop(proc, signal.SIGTERM, group=False)
    assert returncode == 143, stderr
    assert took < STOP_BOUND_S, took
    assert "Traceback" not in stderr
    with running_server(*SERVER) as healthy:
        again = subprocess.run(
            [sys.executable, "-m", "ocrflow.cli", "run", str(folder), "-o", str(out),
             *vlm_args(healthy.base_url)],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["out"]["documents"] == {"ok": 3}
