"""A long document is split into page ranges and joined once they are all done. A worker
killed right before it joins (every range done, no document yet) must not lose the
document: the next run, or another worker, finds the join item open and assembles it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import make_examples

from ocrflow.storage.open import open_store
from ocrflow.workspace.workitems import Manifest

from .cli_helpers import ocrflow, results, status_json

PAGES = 5

#: ``ocrflow`` with its assembly of a split document (the one ``finish`` that flushes)
#: replaced by a SIGKILL-like exit: the process dies in the window between marking the
#: last range done and the document's commit.
KILLED_AT_THE_JOIN = """
import os, sys
from ocrflow.pipeline.documents import DocumentPipeline
from ocrflow.cli import main

finish = DocumentPipeline.finish

async def finish_or_die(self, job, opened, results=None, **options):
    if options.get("flush"):
        os._exit(137)
    return await finish(self, job, opened, results, **options)

DocumentPipeline.finish = finish_or_die
sys.argv = ["ocrflow", *sys.argv[1:]]
main()
"""


def _long_pdf(path: Path) -> None:
    body = [[f"Long document page {p}. Its ranges are joined into one."] for p in range(1, 6)]
    path.write_bytes(make_examples.text_pdf(body))


def test_a_worker_killed_before_the_join_loses_no_document(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    _long_pdf(docs / "long.pdf")
    out = tmp_path / "out"
    args = ["run", str(docs), "-o", str(out), "--text-layer", "only", "-q", "--json"]
    scale = ["--split-pages", "2", "--lease-ttl", "2", "--workers", "1"]
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_AT_THE_JOIN, *args, *scale],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert killed.returncode == 137, killed.stderr
    manifest = Manifest(open_store(str(out)))
    (ranges,) = manifest.splits()
    assert len(ranges) == 3 and all(manifest.item_done(r.item_id) for r in ranges)
    assert results(out) == [], "the document was committed before the kill"
    # What a run left behind: the join is the one item open, so the run is not finished.
    (join,) = manifest.open_items()
    assert join.is_join
    assert status_json(out)["documents"] == {"pending": 1}

    rerun = ocrflow(*args, *scale, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    (record,) = results(out)
    assert len(record["attributes"]["pdf_page_numbers"]) == PAGES
    for page in range(1, PAGES + 1):
        assert record["text"].count(f"Long document page {page}.") == 1
    assert manifest.open_items() == [] and manifest.unfinished() == 0
    report = json.loads(rerun.stdout)
    assert report["documents"] == {"ok": 1}, report
    assert not list((out / ".ocrflow" / "pages").rglob("*.json")), "checkpoints left behind"


def test_a_lost_checkpoint_is_converted_again_before_the_join(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    _long_pdf(docs / "long.pdf")
    out = tmp_path / "out"
    args = ["run", str(docs), "-o", str(out), "--text-layer", "only", "-q", "--json"]
    scale = ["--split-pages", "2", "--lease-ttl", "2", "--workers", "1"]
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_AT_THE_JOIN, *args, *scale],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert killed.returncode == 137, killed.stderr
    # Every range done, but the checkpoint of pages 3-4 gone (removed by hand, say).
    (lost,) = (out / ".ocrflow" / "pages").rglob("000003-000004.json")
    lost.unlink()

    rerun = ocrflow(*args, *scale, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert "pages [3, 4] lost their checkpoints" in rerun.stderr
    (record,) = results(out)
    assert len(record["attributes"]["pdf_page_numbers"]) == PAGES
    for page in range(1, PAGES + 1):
        assert record["text"].count(f"Long document page {page}.") == 1
    assert json.loads(rerun.stdout)["pages"] == {"ok": 2}  # only the lost range again
    assert Manifest(open_store(str(out))).unfinished() == 0


def test_a_split_document_is_joined_once(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    _long_pdf(docs / "long.pdf")
    out = tmp_path / "out"
    done = ocrflow(
        "run", str(docs), "-o", str(out), "--text-layer", "only", "-q", "--json",
        "--split-pages", "2",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (record,) = results(out)
    assert all(record["text"].count(f"page {p}.") == 1 for p in range(1, PAGES + 1))
    manifest = Manifest(open_store(str(out)))
    assert manifest.unfinished() == 0
    # An OUT of an older ocrflow: its split documents were assembled without a join item.
    (join,) = [i for i in manifest.all_items() if i.is_join]
    (out / ".ocrflow" / "items" / f"{join.item_id}.json").unlink()
    assert status_json(out)["documents"] == {"ok": 1, "pending": 1}
    # A rerun finds everything done: it reports the document as finished before, once,
    # and marks its join done without assembling it again.
    again = ocrflow(
        "run", str(docs), "-o", str(out), "--text-layer", "only", "-q", "--json",
        "--split-pages", "2",
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert len(results(out)) == 1
    report = json.loads(again.stdout)
    assert report["documents_skipped"] == 1, report
    assert status_json(out)["documents"] == {"ok": 1}
