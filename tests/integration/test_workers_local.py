"""``ocrflow run`` and two ``ocrflow worker`` processes race over one local OUT: leases
(create-if-absent, flock'ed compare-and-write) keep every document and every page to one
worker. Born-digital pages take the text-layer route, so the race is about leases, not OCR."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import make_examples
import pyarrow.parquet as pq
import pytest

from .cli_helpers import results, status_json

pytestmark = pytest.mark.slow

DOCUMENTS = 240
PAGES = 2


def _start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "ocrflow.cli", *args],
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _make_inputs(folder: Path) -> dict[str, int]:
    """``DOCUMENTS`` small born-digital PDFs; returns each file's page count."""
    folder.mkdir()
    for n in range(DOCUMENTS):
        pages = [[f"Document {n} page {p}", f"Fox {n}-{p} jumps."] for p in range(1, PAGES + 1)]
        (folder / f"doc{n:03d}.pdf").write_bytes(make_examples.text_pdf(pages))
    return {f"doc{n:03d}.pdf": PAGES for n in range(DOCUMENTS)}


def _wait_for_plan(out: Path, process: subprocess.Popen[str], deadline_s: float = 60) -> None:
    """Until the run recorded its config and its items (a worker needs both to join)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end and process.poll() is None:
        manifest = out / ".ocrflow" / "manifest"
        if (out / ".ocrflow" / "config.json").exists() and any(manifest.glob("*.jsonl")):
            return
        time.sleep(0.02)
    pytest.fail(f"the run did not plan its items (exit {process.poll()})")


def _summary(process: subprocess.Popen[str]) -> dict:
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, stderr[-2000:]
    return json.loads(stdout)


#: Plain outputs; Parquet rows, which wait in a buffer for their shard (the item is kept
#: leased until then); documents split into one-page ranges, joined by whoever finishes the
#: last one.
PARQUET = ["--format", "markdown,jsonl,parquet"]
LAYOUTS = {"whole": [], "buffered": PARQUET, "ranges": [*PARQUET, "--split-pages", "1"]}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_run_and_two_workers_convert_every_page_once(tmp_path: Path, layout: str) -> None:
    expected = _make_inputs(tmp_path / "in")
    out = tmp_path / "out"
    common = ["--workers", "1", "--json", "-q"]
    run = _start("run", str(tmp_path / "in"), "-o", str(out), *common, *LAYOUTS[layout])
    _wait_for_plan(out, run)
    workers = [_start("worker", str(out), *common) for _ in range(2)]
    summaries = [_summary(p) for p in (run, *workers)]

    records = results(out)
    names = [record["metadata"]["source_path"] for record in records]
    assert sorted(names) == sorted(expected)  # every document, each once
    for record in records:
        pages = [span[2] for span in record["attributes"]["pdf_page_numbers"]]
        assert pages == list(range(1, PAGES + 1)), record["metadata"]["source_path"]
        assert record["metadata"]["status"] == "ok"
    markers = list((out / ".ocrflow" / "done").glob("*.json"))
    assert len(markers) == DOCUMENTS
    # No page was converted twice: the processes' own tallies add up to the pages there are.
    converted = [sum(s["pages"].values()) for s in summaries]
    committed = [s["documents"].get("ok", 0) - s["documents_skipped"] for s in summaries]
    assert sum(converted) == DOCUMENTS * PAGES, converted
    assert sum(committed) == DOCUMENTS, committed
    # A race took place: the run did not finish alone. (Both workers usually take part, but
    # a worker that starts its interpreter late on a loaded machine may find nothing left.)
    assert converted[0] > 0 and sum(converted[1:]) > 0, f"no race: {converted}"
    assert all(s["leases_lost"] == 0 for s in summaries)
    if layout != "whole":
        rows = [pq.read_table(f).column("id").to_pylist() for f in out.rglob("*.parquet")]
        ids = [i for shard in rows for i in shard]
        assert len(ids) == len(set(ids)) == DOCUMENTS
    report = status_json(out)
    assert report["documents"] == {"ok": DOCUMENTS}
    assert report["pages"] == {"ok": DOCUMENTS * PAGES}
    assert report["active_leases"] == []
