"""Blocks through a whole ``ocrflow run``: the embedded engine on the sample scan and a
grounded VLM (the test server answering as DeepSeek-OCR) reach the JSONL record, in the
order of the page's text, with the boxes the engine or model gave."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ocrflow.document import Block, BlockLabel, blocks_from_rows
from ocrflow.recipes.deepseek import GRID
from tests.fakevllm.process import running_server

from .cli_helpers import ocrflow, results
from .vlm_helpers import rendered_tags

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _page_blocks(record: dict[str, Any]) -> dict[int, tuple[Block, ...]]:
    numbers = {end: number for _, end, number in record["attributes"]["pdf_page_numbers"]}
    return {
        numbers[end]: blocks_from_rows(rows) for _, end, rows in record["attributes"]["page_blocks"]
    }


def _assert_in_text_order(text: str, blocks: tuple[Block, ...]) -> None:
    cursor = 0
    for block in blocks:
        found = text.find(block.text, cursor)
        assert found >= 0, (block.text, text[cursor:])
        cursor = found + len(block.text)


def test_the_embedded_engines_blocks_reach_the_jsonl_record(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = ocrflow("run", str(EXAMPLES / "scanned.pdf"), "-o", str(out), "--workers", "1", "-q")
    assert done.returncode == 0, done.stderr[-2000:]
    (record,) = results(out)
    blocks = _page_blocks(record)
    for start, end, number in record["attributes"]["pdf_page_numbers"]:
        page_text = record["text"][start:end]
        assert blocks[number] and "\n\n".join(b.text for b in blocks[number]) == page_text
        for block in blocks[number]:
            assert block.bbox and block.confidence and block.lines
            assert all(line.bbox and line.confidence for line in block.lines)


@pytest.mark.slow
def test_grounded_blocks_of_the_test_server_reach_the_jsonl_record(tmp_path: Path) -> None:
    pdf = EXAMPLES / "born-digital.pdf"
    out = tmp_path / "out"
    flags = ("--reply-format", "deepseek", "--model", "deepseek-ocr", "--pages-per-s", "200")
    with running_server(*flags) as server:
        done = subprocess.run(
            [
                sys.executable, "-m", "ocrflow.cli", "run", str(pdf), "-o", str(out),
                "--text-layer", "off", "--engine", "openai", "--server", server.base_url,
                "--model", "deepseek-ocr", "--recipe", "deepseek", "--workers", "1", "-q",
            ],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    (record,) = results(out)
    tags = rendered_tags(pdf, (1, 2, 3), target_dim=640)
    blocks = _page_blocks(record)
    figures = {f["page"]: f for f in record["attributes"]["figures"]}
    for start, end, number in record["attributes"]["pdf_page_numbers"]:
        title, body, figure = blocks[number]
        tag = tags[number]
        seed = int(tag[-6:], 16)
        x1, y1 = seed % 400, (seed // 7) % 500
        assert title.label is BlockLabel.TITLE and tag in title.text
        assert title.bbox == pytest.approx(
            (x1 / GRID, y1 / GRID, (x1 + 500) / GRID, (y1 + 300) / GRID), abs=1e-4
        )
        assert body.label is BlockLabel.TEXT
        assert figure.label is BlockLabel.FIGURE and figure.text.startswith("![image](figures/")
        assert figure.bbox == pytest.approx(figures[number]["box"], abs=1e-4)
        _assert_in_text_order(record["text"][start:end], blocks[number])
