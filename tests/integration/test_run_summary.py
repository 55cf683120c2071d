"""What a run reports at its end: its run id as ``status`` has it, and the whole OUT's
documents beside its own part, also when another run shared the OUT."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import make_examples
import pytest

from .cli_helpers import ocrflow, status_json

pytestmark = pytest.mark.slow

DOCUMENTS = 12


@pytest.fixture
def inputs(tmp_path: Path) -> Path:
    folder = tmp_path / "in"
    folder.mkdir()
    for n in range(DOCUMENTS):
        pages = [[f"Document {n}, page {p}."] for p in range(3)]
        (folder / f"doc{n:02d}.pdf").write_bytes(make_examples.text_pdf(pages))
    return folder


def test_run_json_has_the_run_id_status_shows(inputs: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = ocrflow("run", str(inputs), "-o", str(out), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    status = status_json(out)
    assert report["run_id"] == status["last_run"]["run_id"] != "run"
    assert report["worker"] == status["last_run"]["worker"] == status["workers"][0]["worker"]
    assert report["out"]["documents"] == {"ok": DOCUMENTS} == status["documents"]


def test_two_concurrent_runs_each_report_the_whole_out(inputs: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    command = [sys.executable, "-m", "ocrflow.cli", "run", str(inputs), "-o", str(out)]
    runs = [
        subprocess.Popen([*command, *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for extra in (["--json"], ["--workers", "1"])
    ]
    (json_out, json_err), (_, table) = (run.communicate(timeout=600) for run in runs)
    assert [run.returncode for run in runs] == [0, 0], (json_err, table)
    report = json.loads(json_out)
    # Its own part (what it converted and what it found done) and the whole OUT, apart.
    assert sum(report["documents"].values()) <= DOCUMENTS
    assert report["out"]["documents"] == {"ok": DOCUMENTS}
    assert report["out"]["pages"] == {"ok": 3 * DOCUMENTS}
    text = table.decode()
    assert "this run" in text and "whole OUT" in text
    row = next(line for line in text.splitlines() if "documents ok" in line)
    cells = [cell.strip() for cell in row.split("│") if cell.strip()]
    assert cells[0] == "documents ok" and cells[-1] == str(DOCUMENTS), row
    assert status_json(out)["documents"] == {"ok": DOCUMENTS}
