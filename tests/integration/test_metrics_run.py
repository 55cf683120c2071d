"""``ocrflow run --metrics-port``: a real run against the fake vLLM server, scraped while it goes.

The counters must move during the run (never backwards) and, once every document is done,
equal what the run did: ``ocrflow_pages_total`` equals the pages, which equals the
completions the fake server answered and the engine histogram's count; the vLLM gauges the
engine polls are passed through under ``ocrflow_vllm_*``.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.fakevllm.process import running_server

from .vlm_helpers import MODEL, vlm_args

PAGES = (2, 3, 5)
#: Slow enough that a run of 10 pages takes a couple of seconds: scrapes land mid-run.
SERVER = ("--model", MODEL, "--reply-format", "olmocr",
          "--pages-per-s", "6", "--tokens-per-page", "20", "--max-num-seqs", "4")  # fmt: skip


def _pdfs(folder: Path) -> list[Path]:
    import make_examples

    paths = []
    for n, count in enumerate(PAGES):
        pages = [[f"Document {n} page {p}", f"Line {p * 7 + n} of a metrics test."]
                 for p in range(count)]  # fmt: skip
        path = folder / f"doc{n}.pdf"
        path.write_bytes(make_examples.text_pdf(pages))
        paths.append(path)
    return paths


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """``{(sample name, sorted labels): value}`` of one scrape."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _total(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str) -> float:
    return sum(v for (n, _), v in samples.items() if n == name)


def _scrape_until_done(url: str, proc: subprocess.Popen[str], documents: int) -> list[dict]:
    """Scrape every 50 ms until ``documents`` are counted done; every scrape, in order."""
    scrapes: list[dict] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        with contextlib.suppress(httpx.TransportError):  # not listening yet
            scrapes.append(_samples(httpx.get(url, timeout=5).text))
        if scrapes and _total(scrapes[-1], "ocrflow_documents_total") >= documents:
            return scrapes
        time.sleep(0.05)
    raise AssertionError("the run did not finish in time")


@pytest.mark.slow
def test_metrics_port_counts_every_page(tmp_path: Path) -> None:
    pdfs = _pdfs(tmp_path)
    port = _free_port()
    out = tmp_path / "out"
    with running_server(*SERVER) as server:
        args = vlm_args(server.base_url, "--metrics-port", str(port), "--metrics-linger", "5")
        proc = subprocess.Popen(
            [sys.executable, "-m", "ocrflow.cli", "run", *map(str, pdfs), "-o", str(out), *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ),
        )  # fmt: skip
        try:
            scrapes = _scrape_until_done(f"http://127.0.0.1:{port}/metrics", proc, len(PAGES))
            # The totals are final once the documents are: scrape once more to be sure.
            final = _samples(httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text)
            answered = server.stats()["outcomes"]
        finally:
            # The run ends by itself after the linger: a signal sent once the documents
            # are counted could still land before the run has finished (exit 130).
            try:
                stdout, stderr = proc.communicate(timeout=90)
            except subprocess.TimeoutExpired:
                proc.kill()
                stdout, stderr = proc.communicate()
    assert proc.returncode == 0, (stdout, stderr)
    summary = json.loads(stdout)
    pages = sum(PAGES)
    assert summary["pages"] == {"ok": pages}

    seen = [_total(s, "ocrflow_pages_total") for s in scrapes]
    assert seen == sorted(seen), "a counter went backwards"
    assert any(0 < v < pages for v in seen), f"no scrape saw the run half-way: {seen}"
    assert final[("ocrflow_pages_total", (("route", "engine"), ("status", "ok")))] == pages
    assert _total(final, "ocrflow_pages_total") == pages
    assert sum(answered.values()) == pages  # every page reached the server exactly once
    assert final[("ocrflow_engine_request_seconds_count", ())] == pages
    assert final[("ocrflow_documents_total", (("reason", ""), ("status", "ok")))] == len(PAGES)
    assert final[("ocrflow_queue_pages", ())] == 0
    assert final[("ocrflow_engine_requests_in_flight", ())] == 0
    # The engine's vLLM gauges while it is open (it closes right after the last document).
    passed = {(n, dict(labels)["server"]) for s in scrapes for n, labels in s if "_vllm_" in n}
    assert ("ocrflow_vllm_num_requests_waiting", server.base_url) in passed, sorted(final)
    assert {n for n, _ in passed} == {
        "ocrflow_vllm_num_requests_running",
        "ocrflow_vllm_num_requests_waiting",
        "ocrflow_vllm_kv_cache_usage_perc",
    }


def test_metrics_port_in_use_is_a_usage_error(tmp_path: Path) -> None:
    """A port already taken: exit 2 with one line naming it, before any work."""
    pdf = _pdfs(tmp_path)[0]
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "ocrflow.cli", "run", str(pdf), "-o", str(tmp_path / "o"),
             "--text-layer", "only", "-q", "--metrics-port", str(port)],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert f"--metrics-port {port}" in done.stderr
    assert not (tmp_path / "o" / "markdown").exists()
