"""``ocrflow run --engine openai|vllm`` explains why it cannot start, and says it is waiting.

The real CLI runs as a subprocess against nothing (a closed port), the fakevllm server
(other models, an API key, a warm-up) and the fake ``vllm serve``: each failure exits 2 with
one line that names the URL and the cause, no traceback, never the key; while a server
loads, progress lines reach stderr even with ``-q``.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakevllm.process import FAST, running_server

from .cli_helpers import ocrflow

FAKE_VLLM = Path(__file__).resolve().parents[1] / "data" / "fake_vllm_cli.py"
SECRET = "sk-fake-31c9e5a2b7"


@pytest.fixture(scope="module")
def pdf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A one-page born-digital PDF (its text layer serves the page once the engine is up)."""
    import make_examples

    lines = ["Readiness", "A page whose native text is good enough to keep.",
             "It needs no engine call once the engine is ready."]  # fmt: skip
    path = tmp_path_factory.mktemp("pdf") / "page.pdf"
    path.write_bytes(make_examples.text_pdf([lines]))
    return path


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def openai_run(
    pdf: Path, out: Path, server: str, *extra: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``ocrflow run PDF -o OUT --engine openai --server SERVER -q EXTRA``."""
    return ocrflow(
        "run", str(pdf), "-o", str(out), "--engine", "openai", "--server", server,
        "--recipe", "markdown", "-q", *extra, timeout=120, env=env,
    )  # fmt: skip


def assert_one_error_line(stderr: str) -> str:
    """The one ``error:`` line of a usage failure (and no traceback)."""
    assert "Traceback" not in stderr
    errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, stderr
    return errors[0]


def test_a_closed_port_exits_2_with_the_url_and_the_cause(pdf: Path, tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    done = openai_run(pdf, tmp_path / "out", url, "--model", "x", "--unreachable-timeout", "2")
    assert done.returncode == 2, done.stderr
    line = assert_one_error_line(done.stderr)
    assert line == (
        f"error: cannot reach the server for 2 s: {url}: connection refused "
        "(is it running, and is the URL right? --unreachable-timeout sets the wait)"
    )


def test_an_unknown_model_exits_2_naming_the_served_models(pdf: Path, tmp_path: Path) -> None:
    with running_server(*FAST, "--model", "olmocr-2") as server:
        done = openai_run(pdf, tmp_path / "out", server.base_url, "--model", "x")
    assert done.returncode == 2, done.stderr
    line = assert_one_error_line(done.stderr)
    assert line.startswith(
        f"error: the server at {server.base_url} does not serve the model 'x'; it serves 'olmocr-2'"
    )


@pytest.mark.parametrize("how", ["option", "environment"])
def test_a_wrong_api_key_exits_2_at_once_without_showing_it(
    pdf: Path, tmp_path: Path, how: str
) -> None:
    wrong = "sk-wrong-6f02d4e1aa"
    by_option = ("--api-key", wrong) if how == "option" else ()
    env = {"OPENAI_API_KEY": wrong} if how == "environment" else None
    with running_server(*FAST, "--api-key", SECRET) as server:
        done = openai_run(
            pdf, tmp_path / "out", server.base_url, "--model", "test-model", *by_option, env=env
        )
        unauthorized = server.stats()["outcomes"].get("unauthorized", 0)
    assert done.returncode == 2, done.stderr
    line = assert_one_error_line(done.stderr)
    assert line.startswith(f"error: the server at {server.base_url} refused the API key (HTTP 401)")
    assert wrong not in done.stderr + done.stdout and SECRET not in done.stderr
    assert unauthorized == 1  # one look, no retries


@pytest.mark.slow
def test_progress_lines_reach_stderr_with_quiet_while_the_server_loads(
    pdf: Path, tmp_path: Path
) -> None:
    # /health answers 503 for 12 s (loading): longer than --unreachable-timeout, which must
    # not apply to a server that answers; a progress line comes after ~5 s of waiting, and
    # the command's own start (imports, under a loaded CI machine: several seconds) eats
    # into the warm-up, so it is well over 5 s.
    with running_server(*FAST, "--warmup-s", "12") as server:
        done = openai_run(
            pdf, tmp_path / "out", server.base_url, "--model", "test-model",
            "--unreachable-timeout", "1",
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    notes = [line for line in done.stderr.splitlines() if "waiting for the server" in line]
    assert notes, done.stderr
    assert (
        f"WARNING waiting for the server at {server.base_url}: loading: /health answered 503 ("
        in notes[0]
    )


@pytest.mark.slow
def test_managed_vllm_reports_progress_with_quiet(pdf: Path, tmp_path: Path) -> None:
    done = ocrflow(
        "run", str(pdf), "-o", str(tmp_path / "out"), "--engine", "vllm", "--model", "tiny",
        "--recipe", "markdown", "--vllm-command", f"{sys.executable} {FAKE_VLLM} serve",
        "--vllm-arg", "--fake-delay 7", "-q", timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    notes = [line for line in done.stderr.splitlines() if "waiting for vLLM at" in line]
    assert notes, done.stderr
    assert "WARNING waiting for vLLM at http://127.0.0.1:" in notes[0]
    assert notes[0].endswith(" s)") and "/v1: loading (" in notes[0]
