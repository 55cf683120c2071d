"""SIGKILL an ocrflow run against the VLM test server mid-way, run it again: nothing lost,
nothing doubled, and no page finished by the first run is asked of the server again.

Nine real PDFs (176 pages) go through the olmOCR recipe with every page OCR'd. The first
run is killed (its whole process group, render workers included) once about a third of the
pages are finished, either in finished documents (done markers) or in page checkpoints of
unfinished ones. The server keeps running, so its per-image request counts span both runs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fakevllm.process import running_server

from .cli_helpers import results
from .vlm_helpers import (
    MODEL,
    check_tags,
    checkpointed_pages,
    done_records,
    page_texts,
    rendered_tags,
    vlm_args,
)

pytestmark = pytest.mark.slow

DOCUMENTS = {
    "pdfjs__tracemonkey.pdf": 14,
    "pdfplumber__issue-67-example.pdf": 22,
    "docling__redp5110_sampled.pdf": 18,
    "olmocr__pdftotext_two_column_issue.pdf": 14,
    "pdfplumber__federal-register-2020-17221.pdf": 15,
    "texlive__texlive-ru.pdf": 46,
    "texlive__latex-mr.pdf": 37,
    "docling__normal_4pages.pdf": 4,
    "ocrmypdf__multipage.pdf": 6,
}
TOTAL = sum(DOCUMENTS.values())


@dataclass
class Killed:
    """What the first run had finished when it was killed."""

    done_docs: dict[str, set[int]]  # doc_id -> pages, finished documents
    checkpointed: dict[str, set[int]]  # doc_id -> pages, unfinished documents
    images: dict[str, int]  # the server's per-image counts just after the kill

    @property
    def pages(self) -> int:
        return sum(map(len, self.done_docs.values())) + sum(map(len, self.checkpointed.values()))


@dataclass
class Resumed:
    out: Path
    pdfs: list[Path]
    killed: Killed
    rerun: subprocess.CompletedProcess[str]
    images: dict[str, int]


def _finished(out: Path) -> tuple[dict[str, set[int]], dict[str, set[int]]]:
    done = {r["doc_id"]: {p["page"] for p in r["pages"]} for r in done_records(out)}
    checkpoints = {d: pages for d, pages in checkpointed_pages(out).items() if d not in done}
    return done, checkpoints


def _wait_for_progress(proc: subprocess.Popen[str], out: Path, timeout: float) -> None:
    """Until about a third of the pages are finished and one document is done."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the first run ended early: {proc.stderr.read()}"  # type: ignore[union-attr]
        done, checkpoints = _finished(out)
        pages = sum(map(len, done.values())) + sum(map(len, checkpoints.values()))
        if done and checkpoints and pages >= TOTAL // 3:
            return
        time.sleep(0.05)
    raise AssertionError("the first run made no progress in time")


@pytest.fixture(scope="module")
def resumed(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Resumed:
    out = tmp_path_factory.mktemp("resume") / "out"
    pdfs = [corpus / "pdfs" / name for name in DOCUMENTS]
    flags = ("--reply-format", "olmocr", "--model", MODEL, "--pages-per-s", "20")
    with running_server(*flags, "--fail-500", "0.02", "--seed", "3") as server:
        command = [
            sys.executable, "-m", "ocrflow.cli", "run", *map(str, pdfs), "-o", str(out),
            *vlm_args(server.base_url, "--request-timeout", "30", "--page-deadline", "120"),
        ]  # fmt: skip
        first = subprocess.Popen(
            command,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            _wait_for_progress(first, out, timeout=120)
        finally:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()
            first.stderr.close()  # type: ignore[union-attr]
        time.sleep(0.5)  # let the server count what was on the wire
        killed = Killed(*_finished(out), images=dict(server.stats()["images"]))
        assert 0 < killed.pages < TOTAL
        rerun = subprocess.run(command, capture_output=True, text=True, timeout=300)
        images = server.stats()["images"]
    print(f"\nkilled with {killed.pages} of {TOTAL} pages finished; rerun rc {rerun.returncode}")
    return Resumed(out, pdfs, killed, rerun, images)


def test_the_rerun_finishes(resumed: Resumed) -> None:
    assert resumed.rerun.returncode == 0, resumed.rerun.stderr[-3000:]


def test_every_document_exactly_once(resumed: Resumed) -> None:
    records = results(resumed.out)
    sources = Counter(Path(r["metadata"]["Source-File"]).name for r in records)
    assert sorted(sources) == sorted(DOCUMENTS)
    assert set(sources.values()) == {1}
    assert len(done_records(resumed.out)) == len(DOCUMENTS)


def test_every_page_exactly_once_with_its_own_text(resumed: Resumed) -> None:
    texts = page_texts(resumed.out)
    for pdf in resumed.pdfs:
        pages = texts[str(pdf)]
        assert sorted(n for n, _ in pages) == list(range(1, DOCUMENTS[pdf.name] + 1)), pdf.name
        tags = check_tags(pages)
        sample = tuple(sorted(tags)[:3])
        assert {n: tags[n] for n in sample} == rendered_tags(pdf, sample), pdf.name
    every = [tag for pages in texts.values() for tag in check_tags(pages).values()]
    assert len(every) == len(set(every))


def test_pages_finished_before_the_kill_were_not_asked_again(resumed: Resumed) -> None:
    by_doc = {r["id"]: r for r in results(resumed.out)}
    before, after = resumed.killed.images, resumed.images
    finished = {**resumed.killed.checkpointed, **resumed.killed.done_docs}
    checked = 0
    for doc_id, pages in finished.items():
        record = by_doc[doc_id]
        texts = {
            number: record["text"][start:end]
            for start, end, number in record["attributes"]["pdf_page_numbers"]
        }
        tags = check_tags([(n, texts[n]) for n in pages])
        for number, tag in tags.items():
            assert after[tag] == before[tag], (record["metadata"]["source_path"], number)
            checked += 1
    assert checked >= TOTAL // 3 - len(DOCUMENTS)  # blank pages carry no tag


def test_the_rerun_asked_only_for_the_rest(resumed: Resumed) -> None:
    before, after = resumed.killed.images, resumed.images
    new_requests = sum(after.values()) - sum(before.values())
    left = TOTAL - resumed.killed.pages
    # One request a page left, plus retries of the injected 500s (2%): far below a redo.
    assert left * 0.8 <= new_requests <= left * 1.3 + 5, (new_requests, left)
