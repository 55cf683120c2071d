"""Region second passes and the clean pass, end to end: ``ocrflow run`` against the fake
vLLM server giving DeepSeek-OCR grounding output.

With ``--second-pass-replies`` the server answers ``Free OCR.`` (a region read again) with
one line naming the crop's tag, and adds a ``table`` region to a reply for an image 1280 px
long (the large mode). With ``--echo-prompt`` a reply opens with its prompt.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from PIL import Image, ImageDraw, ImageFont

from tests.fakevllm.process import running_server

from .cli_helpers import ocrflow
from .vlm_helpers import done_records

pytestmark = pytest.mark.slow  # three ocrflow runs and two servers: ~15 s on two cores

SERVER = ("--reply-format", "deepseek", "--model", "deepseek-ocr", "--pages-per-s", "200")
ECHO = "Convert the document to markdown."


WORDS = [
    "the",
    "board",
    "met",
    "twice",
    "this",
    "year",
    "to",
    "review",
    "quarterly",
    "results",
    "and",
    "approve",
    "budgets",
]


def _words(draw: ImageDraw.ImageDraw, rng: random.Random, top: int, bottom: int) -> None:
    font = ImageFont.load_default(size=22)
    for y in range(top, bottom, 34):
        draw.text((80, y), " ".join(rng.choice(WORDS) for _ in range(9)), "black", font)


def _ruled_page(seed: int) -> Image.Image:
    """A page of prose with a ruled table (a grid) in its middle."""
    page = Image.new("RGB", (850, 1100), "white")
    draw = ImageDraw.Draw(page)
    _words(draw, random.Random(seed), 80, 280)
    for y in range(300, 900, 120):
        draw.line((80, y, 770, y), fill="black", width=2)
    for x in (80, 400, 770):
        draw.line((x, 300, x, 780), fill="black", width=2)
    return page


def _prose_page() -> Image.Image:
    page = Image.new("RGB", (850, 1100), "white")
    _words(ImageDraw.Draw(page), random.Random(99), 80, 1000)
    return page


def _make_pdf(path: Path, pages: list[Image.Image]) -> Path:
    pages[0].save(path, "PDF", resolution=100, save_all=True, append_images=pages[1:])
    return path


def _run(pdf: Path, out: Path, url: str, *extra: str) -> None:
    done = ocrflow(
        "run", str(pdf), "-o", str(out), "--text-layer", "off", "--engine", "openai",
        "--server", url, "--model", "deepseek-ocr", "--recipe", "deepseek", "--workers", "1",
        "-q", *extra,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]


def _pages(out: Path) -> dict[int, dict[str, Any]]:
    [record] = done_records(out)
    return {page["page"]: page for page in record["pages"]}


def test_roi_reads_and_a_capped_large_mode_retry(tmp_path: Path) -> None:
    pdf = _make_pdf(tmp_path / "report.pdf", [_ruled_page(0), _ruled_page(9), _prose_page()])
    out = tmp_path / "out"
    with running_server(*SERVER, "--second-pass-replies") as server:
        _run(pdf, out, server.base_url, "--roi-labels", "title,text", "--retry-large-cap", "1")
        stats = server.stats()

    pages = _pages(out)
    # Pages were rendered at 1280 px (the size recorded: the frame of the boxes); the first
    # read saw 640 px (the recipe's mode), hence the large-mode retries below.
    assert {max(p["image_size"].values()) for p in pages.values()} == {1280}
    retries = [pages[n]["attributes"]["second_pass"]["large_retry"] for n in (1, 2)]
    assert sorted(r["accepted"] for r in retries) == [False, True]
    retried = 1 if retries[0]["accepted"] else 2
    capped = 3 - retried
    assert pages[retried]["attributes"]["second_pass"]["large_retry"] == {
        "missing": ["table"], "dim": 1280, "accepted": True, "reason": "the large read has table",
    }  # fmt: skip
    assert pages[capped]["attributes"]["second_pass"]["large_retry"]["reason"] == (
        "cap of 1 pages reached"
    )
    assert "large_retry" not in pages[3]["attributes"]["second_pass"]  # no rules: no retry
    for page in pages.values():
        title, text = page["attributes"]["second_pass"]["roi"]
        assert (title["label"], title["accepted"], title["reason"]) == (
            "title", True, "passed its checks",
        )  # fmt: skip
        assert (text["label"], text["accepted"]) == ("text", False)
        assert text["reason"].startswith("length ratio 0.")
    # 3 first reads + 1 large read + 2 regions on each of the 3 pages.
    assert stats["outcomes"]["stop"] == 10

    markdown = (out / "markdown" / "report.pdf.md").read_text()
    assert markdown.count("<table>") == 1 and "<td>total</td>" in markdown
    assert markdown.count("# Region page-") == 3  # each title read again, and kept
    assert "# Page page-" not in markdown


def test_without_second_passes_a_page_is_read_once_at_its_mode(tmp_path: Path) -> None:
    pdf = _make_pdf(tmp_path / "report.pdf", [_ruled_page(0)])
    out = tmp_path / "out"
    with running_server(*SERVER, "--second-pass-replies") as server:
        _run(pdf, out, server.base_url)
        stats = server.stats()
    [page] = _pages(out).values()
    assert "second_pass" not in page["attributes"] and stats["outcomes"]["stop"] == 1
    assert "<table>" not in (out / "markdown" / "report.pdf.md").read_text()


def _figure_document(out: Path) -> dict[str, Any]:
    [path] = (out / ".ocrflow" / "figures").glob("*.json")
    return json.loads(path.read_text())


def test_the_clean_pass_strips_a_prompt_echo_and_keeps_the_raw_text(tmp_path: Path) -> None:
    pdf = _make_pdf(tmp_path / "report.pdf", [_prose_page()])
    with running_server(*SERVER, "--echo-prompt") as server:
        _run(pdf, tmp_path / "clean", server.base_url)
        _run(pdf, tmp_path / "raw", server.base_url, "--no-clean")

    clean_md = (tmp_path / "clean" / "markdown" / "report.pdf.md").read_text()
    raw_md = (tmp_path / "raw" / "markdown" / "report.pdf.md").read_text()
    assert clean_md.startswith("# Page page-") and ECHO not in clean_md
    assert raw_md.startswith(ECHO + "\n\n# Page page-")
    [cleaned] = _figure_document(tmp_path / "clean")["pages"]
    assert cleaned["raw_text"].startswith(ECHO) and cleaned["attributes"]["cleaned"] == [
        "prompt_echo"
    ]
    assert cleaned["text"] == cleaned["raw_text"].removeprefix(ECHO + "\n\n")
    [kept] = _figure_document(tmp_path / "raw")["pages"]
    assert kept["raw_text"] is None and "cleaned" not in kept["attributes"]
    [page] = _pages(tmp_path / "clean").values()
    assert page["attributes"]["cleaned"] == ["prompt_echo"]
