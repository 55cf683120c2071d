"""Without a terminal, ``ocrflow run`` logs a progress line at a steady interval — pages
done/total, pages/s, ETA, failures — long before its one document finishes, and even with
``--format parquet`` (whose per-document lines wait for the shard)."""

from __future__ import annotations

import re
from pathlib import Path

import make_examples
import pytest

from tests.fakevllm.process import running_server

from .cli_helpers import ocrflow
from .vlm_helpers import MODEL

pytestmark = pytest.mark.slow

PAGES = 48
# Two sequences at a time, six pages a second at most: the run lasts several seconds.
SLOW_SERVER = ("--pages-per-s", "6", "--max-num-seqs", "2", "--tokens-per-page", "20")
SLOW_SERVER += ("--model", MODEL, "--reply-format", "olmocr")
PROGRESS = re.compile(
    r"progress: (?P<done>\d+)/(~?(?P<total>\d+)|\?) pages.*?, (?P<docs>\d+)/1 documents, "
    r"(?P<rate>[\d.]+) pages/s, ETA \S+, failed: (?P<failed>\d+) pages, \d+ documents"
)


def test_progress_lines_come_while_one_long_document_converts(tmp_path: Path) -> None:
    pdf = tmp_path / "long.pdf"
    pdf.write_bytes(make_examples.text_pdf([[f"Page {n} of a long report."] for n in range(PAGES)]))
    out = tmp_path / "out"
    with running_server(*SLOW_SERVER) as server:
        done = ocrflow(
            "run", str(pdf), "-o", str(out),
            "--text-layer", "off", "--engine", "openai", "--server", server.base_url,
            "--model", MODEL, "--recipe", "olmocr", "--format", "parquet",
            "--progress-interval", "0.5",
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    finished_at = next(i for i, line in enumerate(lines) if "[1/1] long.pdf" in line)
    before = [m for line in lines[:finished_at] if (m := PROGRESS.search(line))]
    counts = [int(m["done"]) for m in before]
    # Several lines before the document finished, with pages moving between them.
    assert len(before) >= 3, done.stderr
    assert any(0 < c < PAGES for c in counts), counts
    assert counts == sorted(counts) and len(set(counts)) >= 2, counts
    assert all(m["total"] == str(PAGES) for m in before if int(m["done"]) > 0)
    assert all(m["docs"] == "0" and m["failed"] == "0" for m in before)
    assert any(float(m["rate"]) > 0 for m in before)


def test_no_progress_lines_with_interval_zero(tmp_path: Path) -> None:
    pdf = tmp_path / "short.pdf"
    pdf.write_bytes(make_examples.text_pdf([["Just one page."]]))
    done = ocrflow("run", str(pdf), "-o", str(tmp_path / "out"), "--progress-interval", "0")
    assert done.returncode == 0, done.stderr
    assert "progress:" not in done.stderr
    assert "[1/1] short.pdf" in done.stderr
