"""``--format``: Parquet beside Markdown and JSONL, exactly once after SIGKILL; figure crops
written by the figure sink (not the reader), linked from the Markdown file's own folder, and
kept across a kill between a page checkpoint and the document's commit."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pypdfium2 as pdfium
import pytest

from ocrflow.sinks.parquet import read_documents
from ocrflow.storage.local import LocalStore
from ocrflow.storage.shards import shard_keys
from tests.fakevllm.process import running_server

from .cli_helpers import ocrflow, results
from .vlm_helpers import done_records

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
LINK = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")


def _shards(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((out / "parquet").glob("*.parquet"))}


def _rows(out: Path) -> list[dict]:
    rows = []
    for path in sorted((out / "parquet").glob("*.parquet")):
        rows.extend(pq.read_table(path).to_pylist())
    return rows


def test_parquet_rows_match_jsonl_records_and_a_rerun_adds_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ("run", str(EXAMPLES), "-o", str(out), "--format", "markdown,jsonl,parquet", "-q")
    first = ocrflow(*args)
    assert first.returncode in (0, 1), first.stderr
    records = {r["id"]: r for r in results(out)}
    rows = _rows(out)
    assert len(rows) == len(records) >= 5
    assert {r["id"]: r["text"] for r in rows} == {i: r["text"] for i, r in records.items()}
    assert len(list((out / "markdown").rglob("*.md"))) == len(records)
    before = _shards(out)

    again = ocrflow(*args)
    assert again.returncode == first.returncode, again.stderr
    assert _shards(out) == before  # no new shard, no rewritten one
    assert len(_rows(out)) == len(records)


def test_unknown_format_is_a_usage_error(tmp_path: Path) -> None:
    done = ocrflow("run", str(EXAMPLES), "-o", str(tmp_path / "o"), "--format", "jsonl,csv")
    assert done.returncode == 2
    assert "csv" in done.stderr and "markdown, jsonl, parquet" in done.stderr


def test_formats_are_recorded_not_fingerprinted(tmp_path: Path) -> None:
    out = tmp_path / "out"
    pdf = str(EXAMPLES / "born_digital.pdf") if (EXAMPLES / "born_digital.pdf").exists() else ""
    inputs = pdf or str(EXAMPLES)
    ocrflow("run", inputs, "-o", str(out), "--text-layer", "only", "--format", "jsonl", "-q")
    config = json.loads((out / ".ocrflow" / "config.json").read_text())
    assert config["run"]["out"]["formats"] == ["jsonl"]
    assert "formats" not in json.dumps(config["settings"])
    assert not (out / "markdown").exists()


# -- SIGKILL during a Parquet run -----------------------------------------------------------
def _split_pdfs(corpus: Path, folder: Path, count: int) -> list[Path]:
    """``count`` single-page born-digital PDFs cut from corpus documents."""
    folder.mkdir()
    made: list[Path] = []
    for name in ("texlive__texlive-ru.pdf", "texlive__latex-mr.pdf", "pdfjs__tracemonkey.pdf"):
        source = pdfium.PdfDocument(str(corpus / "pdfs" / name))
        for index in range(len(source)):
            if len(made) == count:
                return made
            single = pdfium.PdfDocument.new()
            single.import_pages(source, [index])
            path = folder / f"{len(made):03d}.pdf"
            single.save(str(path))
            made.append(path)
    return made


@pytest.mark.slow
def test_sigkill_during_a_parquet_run_then_resume_keeps_each_document_once(
    corpus: Path, tmp_path: Path
) -> None:
    pdfs = _split_pdfs(corpus, tmp_path / "in", 90)
    out = tmp_path / "out"
    command = [
        sys.executable, "-m", "ocrflow.cli", "run", str(tmp_path / "in"), "-o", str(out),
        "--text-layer", "only", "--format", "jsonl,parquet", "--workers", "1", "-q",
    ]  # fmt: skip
    env = {**os.environ, "OCRFLOW_PARQUET_MAX_ROWS": "3"}
    killed = 0
    for attempt in range(3):  # kill at a random moment once some shards exist
        proc = subprocess.Popen(
            command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        target = 2 + attempt * 3
        while len(shard_keys(LocalStore(out))) < target and proc.poll() is None:
            assert time.monotonic() < deadline, "no shards appeared"
            time.sleep(0.02)
        time.sleep(random.uniform(0.0, 0.3))
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        killed += proc.wait() == -signal.SIGKILL
    assert killed >= 1, "no run was killed mid-way"
    final = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert final.returncode == 0, final.stderr[-2000:]

    rows = _rows(out)  # every shard as it lies on disk, after the run's finalize
    counts = Counter(r["id"] for r in rows)
    done = {r["doc_id"] for r in done_records(out)}
    assert len(done) == len(pdfs)
    assert set(counts) == done  # every done marker has its row ...
    assert set(counts.values()) == {1}  # ... exactly once
    assert {r["id"] for r in results(out)} == done
    assert len(read_documents(LocalStore(out))) == len(pdfs)


# -- figures ------------------------------------------------------------------------------
def _deepseek_run(out: Path, server_url: str, *inputs: str) -> list[str]:
    return [
        sys.executable, "-m", "ocrflow.cli", "run", *inputs, "-o", str(out),
        "--text-layer", "off", "--engine", "openai", "--server", server_url,
        "--model", "deepseek-ocr", "--recipe", "deepseek", "--format", "markdown,jsonl,parquet",
        "--workers", "1", "-q",
    ]  # fmt: skip


def _check_figures(out: Path, pages: int) -> None:
    figures = sorted((out / "figures").rglob("*.png"))
    assert len(figures) == pages  # the fake server draws one image box a page
    for markdown in (out / "markdown").rglob("*.md"):
        links = LINK.findall(markdown.read_text())
        assert links, markdown
        for link in links:
            assert (markdown.parent / link).resolve().is_file(), link
    linked = {link for r in results(out) for link in LINK.findall(r["text"])}
    assert linked == {str(p.relative_to(out)) for p in figures}
    rows = _rows(out)
    assert {f["path"] for r in rows for f in r["figures"]} == linked
    assert all(len(f["box"]) == 4 for r in rows for f in r["figures"])


@pytest.mark.slow
def test_figures_are_written_once_and_links_resolve(corpus: Path, tmp_path: Path) -> None:
    pdf = corpus / "pdfs" / "docling__normal_4pages.pdf"
    nested = tmp_path / "in" / "a" / "b"
    nested.mkdir(parents=True)
    (nested / pdf.name).write_bytes(pdf.read_bytes())
    out = tmp_path / "out"
    flags = ("--reply-format", "deepseek", "--model", "deepseek-ocr", "--pages-per-s", "200")
    with running_server(*flags) as server:
        done = subprocess.run(
            _deepseek_run(out, server.base_url, str(tmp_path / "in")),
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    _check_figures(out, 4)
    assert not (out / ".ocrflow" / "pages").exists() or not any(
        (out / ".ocrflow" / "pages").rglob("*.png")
    )


@pytest.mark.slow
def test_figures_survive_a_kill_after_the_page_checkpoint(corpus: Path, tmp_path: Path) -> None:
    pdf = corpus / "pdfs" / "pdfjs__tracemonkey.pdf"  # 14 pages: a checkpoint of 8 comes first
    out = tmp_path / "out"
    # One page at a time: the pages after the first checkpoint take ~2 s more, so the kill
    # lands before the document is finished (a full batch would answer all 14 at once).
    flags = ("--reply-format", "deepseek", "--model", "deepseek-ocr", "--pages-per-s", "3")
    with running_server(*flags, "--max-num-seqs", "1") as server:
        command = _deepseek_run(out, server.base_url, str(pdf))
        first = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        pages = out / ".ocrflow" / "pages"
        deadline = time.monotonic() + 120
        try:
            while not list(pages.glob("*/*.json")):
                assert first.poll() is None and time.monotonic() < deadline
                time.sleep(0.02)
        finally:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()
        assert list(pages.glob("*/fig-p*.png")), "the checkpoint holds the crops"
        assert not done_records(out)
        assert not (out / "figures").exists()  # the reader wrote nothing itself
        rerun = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    _check_figures(out, 14)
