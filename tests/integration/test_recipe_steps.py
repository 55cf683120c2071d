"""The multi-step ``mineru`` recipe and the DocTags ``granite-docling`` recipe end to end.

``ocrflow run --recipe NAME`` on three corpus PDFs (``--pages 1-2``) against the test
server answering in the model's format (tests/fakevllm/formats_steps.py); MinerU's layout
requests are the server's "figure" requests (``--figure-marker``), so ``/stats`` counts
them apart from the block crops. Then: a run killed (SIGKILL) between the layout and the
crops resumes without sending a layout again, and every crop is answered once; a crop that
keeps failing marks its block, not its page.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ocrflow.document import BlockLabel, blocks_from_rows
from tests.fakevllm.formats_steps import CROPS_PER_PAGE, LAYOUT_MARKER, crop_fails
from tests.fakevllm.process import running_server

from .cli_helpers import results
from .vlm_helpers import page_texts

pytestmark = pytest.mark.slow

PDFS = (
    "docling__normal_4pages.pdf",
    "ocrmypdf__c02-22.pdf",
    "docling__2305.03393v1-pg9.pdf",
)
MINERU = "opendatalab/MinerU2.5-2509-1.2B"
GRANITE = "ibm-granite/granite-docling-258M"
TAG = r"page-[0-9a-f]{12}"


def _cmd(url: str, model: str, recipe: str, out: Path, pdfs: list[Path], *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "ocrflow.cli", "run", *map(str, pdfs), "-o", str(out),
        "--text-layer", "off", "--engine", "openai", "--server", url, "--model", model,
        "--recipe", recipe, "--pages", "1-2", "--json", "-q", *extra,
    ]  # fmt: skip


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)


def page_texts_of(record: dict) -> list[tuple[int, str]]:
    return [(n, record["text"][a:b]) for a, b, n in record["attributes"]["pdf_page_numbers"]]


def _step_files(out: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in (out / ".ocrflow" / "pages").rglob("*.step")]


def test_mineru_two_steps_on_three_pdfs(corpus: Path, tmp_path: Path) -> None:
    pdfs = [corpus / "pdfs" / name for name in PDFS]
    out = tmp_path / "out"
    flags = ("--reply-format", "mineru", "--figure-marker", LAYOUT_MARKER, "--model", MINERU)
    with running_server(*flags, "--tokens-per-page", 40, "--pages-per-s", 400) as server:
        done = _run(_cmd(server.base_url, MINERU, "mineru", out, pdfs))
        stats = server.stats()
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout)
    pages = summary["pages"]["ok"]
    assert pages == 4 and summary["pages"] == {"ok": 4}  # 2 + 1 + 1 pages read
    layouts = stats["figures"]
    assert len(layouts) == pages and set(layouts.values()) == {1}, "one layout a page"
    crops = {t: n for t, n in stats["images"].items() if t not in layouts}
    assert len(crops) == pages * CROPS_PER_PAGE and set(crops.values()) == {1}
    texts = page_texts(out)
    assert sum(len(v) for v in texts.values()) == pages
    for record in results(out):
        for number, text in page_texts_of(record):
            assert text.count("Crop page-") == CROPS_PER_PAGE - 1, (number, text[:300])
            assert "$$\nCrop page-" in text and text.startswith("# Crop page-")
        for _, _, rows in record["attributes"]["page_blocks"]:
            blocks = blocks_from_rows(rows)
            labels = [b.label for b in blocks]
            assert labels == [
                BlockLabel.TITLE, BlockLabel.TEXT, BlockLabel.FORMULA, BlockLabel.TABLE,
                BlockLabel.FIGURE, BlockLabel.PAGE_FOOTER,
            ]  # fmt: skip
            assert blocks[1].bbox == pytest.approx((0.1, 0.12, 0.9, 0.6), abs=0.01)
    left = [p for p in (out / ".ocrflow" / "pages").rglob("*") if p.is_file()]
    assert not left, "step checkpoints are cleared with the page checkpoints"


def test_granite_docling_on_three_pdfs(corpus: Path, tmp_path: Path) -> None:
    pdfs = [corpus / "pdfs" / name for name in PDFS]
    out = tmp_path / "out"
    with running_server("--reply-format", "granite-docling", "--model", GRANITE) as server:
        done = _run(_cmd(server.base_url, GRANITE, "granite-docling", out, pdfs))
        stats = server.stats()
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["pages"] == {"ok": 4}
    assert sum(stats["images"].values()) == 4
    for record in results(out):
        for number, text in page_texts_of(record):
            assert text.startswith("# Page page-"), (number, text[:200])
            assert "![" in text  # the picture became a figure link
        for _, _, rows in record["attributes"]["page_blocks"]:
            blocks = blocks_from_rows(rows)
            assert [b.label for b in blocks] == [
                BlockLabel.TITLE, BlockLabel.TEXT, BlockLabel.FIGURE, BlockLabel.PAGE_FOOTER,
            ]  # fmt: skip
            assert blocks[0].bbox == pytest.approx((0.1, 0.05, 0.9, 0.09), abs=0.01)


def _wait_for_layouts(out: Path, proc: subprocess.Popen, pages: int, deadline_s: float = 60):
    """Until every page's layout is checkpointed (its crops are then on their way)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end and proc.poll() is None:
        try:
            files = _step_files(out)
        except (OSError, json.JSONDecodeError):
            files = []  # a file being replaced
        if len([f for f in files if f.get("first")]) >= pages:
            return
        time.sleep(0.02)
    pytest.fail("the layouts were not checkpointed before the deadline")


def test_sigkill_between_layout_and_crops_resumes(corpus: Path, tmp_path: Path) -> None:
    pdfs = [corpus / "pdfs" / "docling__normal_4pages.pdf"]
    out = tmp_path / "out"
    flags = ("--reply-format", "mineru", "--figure-marker", LAYOUT_MARKER, "--model", MINERU)
    # Every request waits 3 s: the crops are still unanswered when the run is killed.
    with running_server(*flags, "--tokens-per-page", 20, "--slow", 1.0, "--slow-s", 3) as server:
        cmd = _cmd(server.base_url, MINERU, "mineru", out, pdfs)
        proc = subprocess.Popen(
            cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            _wait_for_layouts(out, proc, pages=2)
            os.killpg(proc.pid, signal.SIGKILL)
        finally:
            proc.wait(timeout=30)
        saved = _step_files(out)
        assert len(saved) == 2 and all(f["first"] and not f["answers"] for f in saved)
        before = server.stats()
        assert before["outcomes"].get("stop", 0) == 2, "only the layouts were answered"
        server.set_faults(slow=0.0)
        rerun = _run(cmd)
        after = server.stats()
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert json.loads(rerun.stdout)["pages"] == {"ok": 2}
    assert after["figures"] == before["figures"] and set(after["figures"].values()) == {1}
    # Each crop answered once over both runs (the killed run's crops were never answered).
    assert after["outcomes"]["stop"] == 2 + 2 * CROPS_PER_PAGE
    crops = [t for t in after["images"] if t not in after["figures"]]
    assert len(crops) == 2 * CROPS_PER_PAGE
    for record in results(out):
        for _, text in page_texts_of(record):
            assert text.count("Crop page-") == CROPS_PER_PAGE - 1


def test_failed_crop_marks_its_block_not_its_page(corpus: Path, tmp_path: Path) -> None:
    pdfs = [corpus / "pdfs" / name for name in PDFS]
    out = tmp_path / "out"
    flags = ("--reply-format", "mineru-loop", "--figure-marker", LAYOUT_MARKER, "--model", MINERU)
    with running_server(*flags, "--tokens-per-page", 40, "--pages-per-s", 400) as server:
        done = _run(_cmd(server.base_url, MINERU, "mineru", out, pdfs))
        stats = server.stats()
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["pages"] == {"ok": 4}, "a failed crop fails no page"
    crops = {t: n for t, n in stats["images"].items() if t not in stats["figures"]}
    failing = {t for t in crops if crop_fails(t)}
    assert failing and len(failing) < len(crops), "the seed gives failing and good crops"
    # A failing crop is tried the recipe's two times, a good one once.
    assert all(n == (2 if t in failing else 1) for t, n in crops.items())
    marked = 0
    for record in results(out):
        for _, _, rows in record["attributes"]["page_blocks"]:
            for block in blocks_from_rows(rows):
                if block.source_label and block.source_label.endswith(":failed"):
                    marked += 1
                    assert block.text == "" and block.confidence == 0.0 and block.bbox
    assert marked == len(failing)


def test_sigkill_between_read_and_region_second_passes_resumes(
    corpus: Path, tmp_path: Path
) -> None:
    """DeepSeek's region second passes are steps too: a run killed after the first reads
    does not read those pages again, and each region is answered once."""
    pdf = corpus / "pdfs" / "docling__normal_4pages.pdf"
    out = tmp_path / "out"
    cmd = [
        sys.executable, "-m", "ocrflow.cli", "run", str(pdf), "-o", str(out), "--text-layer", "off",
        "--engine", "openai", "--server", "URL", "--model", "deepseek-ocr",
        "--recipe", "deepseek", "--pages", "1-2", "--roi-labels", "title,text", "--json", "-q",
    ]  # fmt: skip
    flags = ("--reply-format", "deepseek", "--model", "deepseek-ocr", "--second-pass-replies")
    with running_server(*flags, "--tokens-per-page", 20, "--slow", 1.0, "--slow-s", 3) as server:
        cmd[cmd.index("URL")] = server.base_url
        proc = subprocess.Popen(
            cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            _wait_for_layouts(out, proc, pages=2)
            os.killpg(proc.pid, signal.SIGKILL)
        finally:
            proc.wait(timeout=30)
        assert server.stats()["outcomes"].get("stop", 0) == 2, "only the first reads answered"
        server.set_faults(slow=0.0)
        rerun = _run(cmd)
        after = server.stats()
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert json.loads(rerun.stdout)["pages"] == {"ok": 2}
    # Two first reads and two regions a page (title, text), each answered once in all.
    assert after["outcomes"]["stop"] == 2 + 2 * 2
    records = [json.loads(p.read_text()) for p in (out / ".ocrflow" / "done").glob("*.json")]
    (record,) = records
    for page in record["pages"]:
        roi = page["attributes"]["second_pass"]["roi"]
        assert [entry["label"] for entry in roi] == ["title", "text"]
