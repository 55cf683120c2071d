"""``ocrflow run`` against a server that keeps failing: it says so at once, stops with exit
4 instead of waiting out each page's deadline, and a rerun once the server is healthy
finishes every page exactly once. A reply without text is a failed page, never ``ok``.

The real CLI runs as a subprocess against the fake server (``tests/fakevllm``), with the
default breaker (5 failures in a row over 10 s open it) and ``--fail-after 3``.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.fakevllm.process import running_server

from .cli_helpers import ocrflow
from .vlm_helpers import MODEL, check_tags, checkpointed_pages, done_records, page_texts, vlm_args

pytestmark = pytest.mark.slow

PAGES = 12
SERVER = ("--reply-format", "olmocr", "--model", MODEL, "--pages-per-s", "200")
#: A page deadline far beyond the stop: a run that waited out deadlines would show it.
WAIT = ("--fail-after", "3", "--page-deadline", "600", "--request-timeout", "30")


@pytest.fixture(scope="module")
def pdf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import make_examples

    pages = [[f"Page {n}", "Every page of this document needs the engine."] for n in range(PAGES)]
    path = tmp_path_factory.mktemp("pdf") / "pages.pdf"
    path.write_bytes(make_examples.text_pdf(pages))
    return path


def run(pdf: Path, out: Path, url: str, *extra: str) -> tuple[int, str, float]:
    started = time.monotonic()
    done = ocrflow("run", str(pdf), "-o", str(out), *vlm_args(url, *WAIT, *extra), timeout=300)
    return done.returncode, done.stderr, time.monotonic() - started


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error: ")]


@pytest.mark.parametrize(
    ("fault", "cause"),
    [
        ("--fail-500", "HTTP 500: Internal server error (injected)"),
        ("--invalid-json", "HTTP 200 with a body that is not JSON"),
        ("--no-choices", "a completion without a choice"),
    ],
)
def test_a_server_failing_every_request_stops_the_run_with_exit_4(
    pdf: Path, tmp_path: Path, fault: str, cause: str
) -> None:
    out = tmp_path / "out"
    with running_server(*SERVER, fault, "1.0") as server:
        code, stderr, elapsed = run(pdf, out, server.base_url)
        sent = server.stats()["received"]
    assert code == 4, stderr[-3000:]
    assert elapsed < 120  # about 10 s to open the breaker; the page deadline is 600 s
    assert "Traceback" not in stderr
    # One warning as the server starts failing, naming it and the cause ...
    warnings = [line for line in stderr.splitlines() if "is failing" in line]
    assert len(warnings) == 1 and server.base_url in warnings[0] and cause in warnings[0]
    # ... and one error line as the run stops, saying what to do.
    (error,) = error_lines(stderr)
    assert "every server failed every request" in error and cause in error
    assert "run the same command again" in error
    # Nothing was recorded as done or failed: every page is still to do.
    assert done_records(out) == [] and checkpointed_pages(out) == {}
    assert sent < 400  # pages waited while the breaker was open, they did not hammer it


def test_the_rerun_after_the_server_recovers_finishes_every_page_once(
    pdf: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    with running_server(*SERVER, "--fail-500", "1.0") as server:
        code, stderr, _ = run(pdf, out, server.base_url)
        assert code == 4, stderr[-3000:]
        server.set_faults(fail_500=0.0)
        code, stderr, _ = run(pdf, out, server.base_url)
    assert code == 0, stderr[-3000:]
    assert "Traceback" not in stderr and error_lines(stderr) == []
    (record,) = done_records(out)
    assert [p["route"] for p in record["pages"]] == ["engine"] * PAGES
    (texts,) = page_texts(out).values()
    assert sorted(n for n, _ in texts) == list(range(1, PAGES + 1))
    assert len(check_tags(texts)) == PAGES  # each page its own image's answer


def test_replies_without_text_are_failed_pages_never_ok(pdf: Path, tmp_path: Path) -> None:
    """``content: null`` for every page: each attempt fails (``empty_reply``), the page falls
    back to the CPU engine and says why; the document is partial: exit 1. The server did
    answer, so its breaker stays closed and the run does not stop."""
    out = tmp_path / "out"
    with running_server(*SERVER, "--null-content", "1.0") as server:
        code, stderr, _ = run(pdf, out, server.base_url, "--pages", "1-3")
        outcomes = server.stats()["outcomes"]
    assert code == 1, stderr[-3000:]
    assert "is failing" not in stderr and "Traceback" not in stderr
    (record,) = done_records(out)
    assert record["status"] == "partial"
    pages = record["pages"]
    assert [p["route"] for p in pages] == ["fallback"] * 3
    assert {p["reason"] for p in pages} == {"empty_reply"}
    assert all("no text" in p["error"] for p in pages)
    assert outcomes["null_content"] == 3 * 8  # every attempt of every page, each retried
    (texts,) = page_texts(out).values()
    assert all(f"Page {n - 1}" in text for n, text in texts)  # read by the CPU engine
