"""Running heads through a whole ``ocrflow run`` on born-digital corpus PDFs read from
their text layer (the default ``--text-layer auto``), which carries no labels of its own:
the document-level pass labels the repeated footers and page numbers, and
``--drop-headers-footers`` takes them, and only them, out of the Markdown."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.needs import CORPUS as SHARED_CORPUS

from .cli_helpers import ocrflow

CORPUS = SHARED_CORPUS / "pdfs"
REDBOOK = CORPUS / "docling__redp5110_sampled.pdf"
PAPER = CORPUS / "pdfjs__tracemonkey.pdf"
FURNITURE = {"page_header", "page_footer"}

pytestmark = pytest.mark.skipif(not REDBOOK.exists(), reason="the shared corpus is not here")


def _run(pdf: Path, out: Path, *flags: str) -> tuple[dict[str, Any], str]:
    done = ocrflow("run", str(pdf), "-o", str(out), "--format", "json,markdown", "-q", *flags)
    assert done.returncode == 0, done.stderr[-2000:]
    (record,) = (json.loads(p.read_text("utf-8")) for p in (out / "json").glob("*.json"))
    (markdown,) = (p.read_text("utf-8") for p in (out / "markdown").glob("*.md"))
    return record, markdown


def _words(text: str) -> set[str]:
    return set(re.findall(r"[^\W_]{3,}", text.lower()))


def test_running_footers_are_labelled_and_dropped_while_the_body_stays(tmp_path: Path) -> None:
    record, markdown = _run(REDBOOK, tmp_path / "keep")
    furniture = [b for p in record["pages"] for b in p["blocks"] if b["label"] in FURNITURE]
    texts = [b["text"] for b in furniture]
    assert sum("Copyright IBM Corp. 2014" in t for t in texts) >= 3, texts
    assert sum("Row and Column Access Control Support in IBM DB2 for i" in t for t in texts) >= 5
    layer = [b for p in record["pages"] if p["route"] == "text_layer" for b in p["blocks"]]
    labelled = [b for b in layer if b["label"] in FURNITURE]
    assert labelled and all(b["bbox"][1] > 0.9 or b["bbox"][3] < 0.1 for b in labelled)
    first_lines = [p["blocks"][1]["text"] for p in record["pages"] if len(p["blocks"]) > 1]
    assert not any(t.startswith("The SQL CREATE PERMISSION") for t in texts), first_lines

    _, dropped = _run(REDBOOK, tmp_path / "drop", "--drop-headers-footers")
    assert "All rights reserved" in markdown and "All rights reserved" not in dropped
    body = [b["text"] for p in record["pages"] for b in p["blocks"] if b["label"] not in FURNITURE]
    assert _words("\n".join(body)) <= _words(dropped), "every body word stays"
    assert "The SQL CREATE PERMISSION statement that is shown in Figure 3-1" in dropped


def test_a_paper_without_running_heads_keeps_every_block(tmp_path: Path) -> None:
    record, markdown = _run(PAPER, tmp_path / "keep", "--pages", "1-4")
    assert not [b for p in record["pages"] for b in p["blocks"] if b["label"] in FURNITURE]
    _, dropped = _run(PAPER, tmp_path / "drop", "--pages", "1-4", "--drop-headers-footers")
    assert _words(dropped) == _words(markdown)
