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

PAGES = range(1, 6)

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


def _run_args(tmp_path: Path) -> tuple[Path, list[str]]:
    """A 5-page born-digital PDF to convert, and ``ocrflow run``'s arguments: ranges of 2
    pages, a short lease so that a killed run's lease does not hold the rerun up."""
    docs = tmp_path / "docs"
    docs.mkdir()
    body = [[f"Long document page {p}. Its ranges are joined into one."] for p in PAGES]
    (docs / "long.pdf").write_bytes(make_examples.text_pdf(body))
    out = tmp_path / "out"
    args = ["run", str(docs), "-o", str(out), "--text-layer", "only", "-q", "--json"]
    return out, [*args, "--split-pages", "2", "--lease-ttl", "2", "--workers", "1"]


def _killed_at_the_join(args: list[str]) -> None:
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_AT_THE_JOIN, *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert killed.returncode == 137, killed.stderr


def _each_page_once(out: Path) -> None:
    (record,) = results(out)
    assert len(record["attributes"]["pdf_page_numbers"]) == len(PAGES)
    for page in PAGES:
        assert record["text"].count(f"Long document page {page}.") == 1


def test_a_worker_killed_before_the_join_loses_no_document(tmp_path: Path) -> None:
    out, args = _run_args(tmp_path)
    _killed_at_the_join(args)
    manifest = Manifest(open_store(str(out)))
    (ranges,) = manifest.splits()
    assert len(ranges) == 3 and all(manifest.item_done(r.item_id) for r in ranges)
    assert results(out) == [], "the document was committed before the kill"
    # What a run left behind: the join is the one item open, so the run is not finished.
    (join,) = manifest.open_items()
    assert join.is_join
    assert status_json(out)["documents"] == {"pending": 1}

    rerun = ocrflow(*args, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    _each_page_once(out)
    assert manifest.open_items() == [] and manifest.unfinished() == 0
    report = json.loads(rerun.stdout)
    assert report["documents"] == {"ok": 1}, report
    assert not list((out / ".ocrflow" / "pages").rglob("*.json")), "checkpoints left behind"


def test_a_lost_checkpoint_is_converted_again_before_the_join(tmp_path: Path) -> None:
    out, args = _run_args(tmp_path)
    _killed_at_the_join(args)
    # Every range done, but the checkpoint of pages 3-4 gone (removed by hand, say).
    (lost,) = (out / ".ocrflow" / "pages").rglob("000003-000004.json")
    lost.unlink()

    rerun = ocrflow(*args, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert "pages [3, 4] lost their checkpoints" in rerun.stderr
    _each_page_once(out)
    assert json.loads(rerun.stdout)["pages"] == {"ok": 2}  # only the lost range again
    assert Manifest(open_store(str(out))).unfinished() == 0


def test_a_split_document_is_joined_once(tmp_path: Path) -> None:
    out, args = _run_args(tmp_path)
    done = ocrflow(*args)
    assert done.returncode == 0, done.stderr
    _each_page_once(out)
    manifest = Manifest(open_store(str(out)))
    assert manifest.unfinished() == 0
    # An OUT of an older ocrflow: its split documents were assembled without a join item.
    (join,) = [i for i in manifest.all_items() if i.is_join]
    (out / ".ocrflow" / "items" / f"{join.item_id}.json").unlink()
    assert status_json(out)["documents"] == {"ok": 1, "pending": 1}
    # A rerun finds everything done: it reports the document as finished before, once,
    # and marks its join done without assembling it again.
    again = ocrflow(*args)
    assert again.returncode == 0, again.stderr
    _each_page_once(out)
    report = json.loads(again.stdout)
    assert report["documents_skipped"] == 1 and report["pages"] == {}, report
    assert status_json(out)["documents"] == {"ok": 1}
