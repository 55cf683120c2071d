"""Kill a run with SIGKILL midway, run it again: every document and page exactly once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .cli_helpers import ocrflow, results, status_json

pytestmark = pytest.mark.slow

DOCS = [
    "pdfjs__tracemonkey.pdf",
    "docling__redp5110_sampled.pdf",
    "pdfplumber__federal-register-2020-17221.pdf",
    "texlive__texlive-ru.pdf",
    "olmocr__lots_of_sci_tables.pdf",
    "docling__normal_4pages.pdf",
    "olmocr__pdftotext_two_column_issue.pdf",
    "pypdf-samples__multicolumn.pdf",
]


def _wait_for_progress(out: Path, proc: subprocess.Popen, deadline_s: float = 120) -> None:
    """Until at least one document is done and some page checkpoint of another exists."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end and proc.poll() is None:
        done = list((out / ".ocrflow" / "done").glob("*.json"))
        pages = list((out / ".ocrflow" / "pages").rglob("*.json"))
        if done and pages:
            return
        time.sleep(0.05)
    pytest.fail("the run made no visible progress before the deadline or ended too early")


def test_sigkill_then_rerun_loses_and_duplicates_nothing(
    corpus: Path, samples: Path, tmp_path: Path
) -> None:
    inputs = [str(corpus / "pdfs" / name) for name in DOCS] + [str(samples)]
    out = tmp_path / "out"
    cmd = [
        sys.executable,
        "-m",
        "ocrflow.cli",
        "run",
        *inputs,
        "-o",
        str(out),
        "--workers",
        "2",
        "--pages",
        "1-25",
        "-q",
    ]
    proc = subprocess.Popen(
        cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        _wait_for_progress(out, proc)
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    first_done = {p.name for p in (out / ".ocrflow" / "done").glob("*.json")}
    assert 0 < len(first_done) < len(DOCS) + 6, "kill should land mid-run"

    rerun = ocrflow(
        "run", *inputs, "-o", str(out), "--workers", "2", "--pages", "1-25", "--json", "-q"
    )
    assert rerun.returncode == 0, rerun.stderr[-2000:]

    records = results(out)
    ids = [r["id"] for r in records]
    assert len(ids) == len(set(ids)) == len(DOCS) + 6
    names = sorted(Path(r["metadata"]["source_path"]).name for r in records)
    assert len(names) == len(set(names))
    for record in records:
        pages = [span[2] for span in record["attributes"]["pdf_page_numbers"]]
        expected = list(range(1, min(25, record["metadata"]["pdf-total-pages"]) + 1))
        assert pages == expected, record["metadata"]["source_path"]
    report = status_json(out)
    assert report["documents"] == {"ok": len(DOCS) + 6}
    assert not list((out / ".ocrflow" / "pages").rglob("*.json")), "checkpoints are cleared"
    strays = [
        p
        for p in out.rglob("*")
        if p.is_file()
        and ".ocrflow" not in p.parts
        and p.parent.name not in {"results", "markdown"}
    ]
    assert not strays, "a killed write leaves nothing beside the outputs"
