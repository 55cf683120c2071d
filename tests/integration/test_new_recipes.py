"""The one-step recipes of ``ocrflow recipes`` end to end: ``ocrflow run --recipe NAME`` on
three corpus PDFs (``--pages 1-2``) against the test server answering in that model's
format (tests/fakevllm/formats_new.py). Every page is converted, each with its own image's
answer, and the recipe's parser shaped the record (blocks, boxes, attributes)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ocrflow.document import BlockLabel, blocks_from_rows
from ocrflow.recipes.lightonocr import MARKER
from tests.fakevllm.formats_new import GROUNDING_BOXES
from tests.fakevllm.process import running_server

from .cli_helpers import ocrflow, results
from .vlm_helpers import check_tags, done_records, page_texts, rendered_tags

pytestmark = pytest.mark.slow

PDFS = (
    "docling__normal_4pages.pdf",  # four pages: 1-2 are read
    "ocrmypdf__c02-22.pdf",  # a one-page scan with an illustration
    "docling__2305.03393v1-pg9.pdf",  # a one-page paper with a table
)


@dataclass(frozen=True)
class Case:
    recipe: str
    model: str
    reply_format: str
    target_dim: int
    options: tuple[str, ...] = ()


CASES = (
    Case("lightonocr", "lightonai/LightOnOCR-2-1B", "lightonocr", 1540),
    Case(
        "lightonocr",
        "lightonai/LightOnOCR-3-1B",
        "lightonocr-grounding",
        1540,
        ("--recipe-option", "mode=grounding"),
    ),
    Case("paddleocr-vl", "PaddlePaddle/PaddleOCR-VL", "paddleocr-vl", 1960),
    Case("glm-ocr", "zai-org/GLM-OCR", "glm-ocr", 2200),
)


@dataclass
class Run:
    case: Case
    out: Path
    pdfs: list[Path]
    returncode: int
    stderr: str
    pages: list[dict[str, Any]]
    texts: dict[str, list[tuple[int, str]]]
    records: list[dict[str, Any]]


@pytest.fixture(scope="module", params=CASES, ids=lambda c: c.reply_format)
def run(
    request: pytest.FixtureRequest, corpus: Path, tmp_path_factory: pytest.TempPathFactory
) -> Run:
    case: Case = request.param
    out = tmp_path_factory.mktemp(case.reply_format) / "out"
    pdfs = [corpus / "pdfs" / name for name in PDFS]
    flags = ("--reply-format", case.reply_format, "--model", case.model, "--pages-per-s", "100")
    with running_server(*flags) as server:
        done = ocrflow(
            "run", *map(str, pdfs), "-o", str(out), "--pages", "1-2",
            "--text-layer", "off", "--engine", "openai", "--server", server.base_url,
            "--model", case.model, "--recipe", case.recipe, *case.options,
            "--workers", "1", "--json", "-q",
            timeout=600,
        )  # fmt: skip
    records = done_records(out)
    return Run(
        case,
        out,
        pdfs,
        done.returncode,
        done.stderr,
        [dict(p, source=r.get("source", "")) for r in records for p in r["pages"]],
        page_texts(out),
        results(out),
    )


def test_every_page_is_converted_or_recorded_with_a_reason(run: Run) -> None:
    assert run.returncode == 0, run.stderr[-3000:]
    assert len(run.pages) == 4  # pages 1-2 of the first PDF, page 1 of the others
    routes = Counter(p["route"] for p in run.pages)
    assert set(routes) <= {"engine", "fallback", "blank"}, routes
    assert all(p["error"] for p in run.pages if p["route"] == "fallback")
    assert routes["engine"] == 4, [(p["page"], p["route"], p.get("error")) for p in run.pages]


def test_each_page_holds_its_own_image_s_answer(run: Run) -> None:
    for pdf in run.pdfs:
        texts = run.texts[str(pdf)] if str(pdf) in run.texts else run.texts[pdf.name]
        tags = check_tags(texts)
        pages = tuple(sorted(tags))
        assert pages == ((1, 2) if pdf.name == PDFS[0] else (1,))
        assert tags == rendered_tags(pdf, pages, target_dim=run.case.target_dim)
        for _, text in texts:
            assert "(temperature 0.2)" in text or "(temperature 0.0)" in text, text[-200:]


def test_the_recipe_parser_shaped_the_record(run: Run) -> None:
    fmt = run.case.reply_format
    for record in run.records:
        text = record["text"]
        blocks = [blocks_from_rows(rows) for _, _, rows in record["attributes"]["page_blocks"]]
        assert blocks and all(page for page in blocks)
        if fmt == "lightonocr-grounding":
            for page in blocks:
                assert [b.label for b in page[:2]] == [BlockLabel.TITLE, BlockLabel.TEXT]
                for block, label in zip(page, ("title", "text"), strict=False):
                    expected = tuple(v / 1000 for v in GROUNDING_BOXES[label])
                    assert block.bbox == pytest.approx(expected, abs=0.01)
            # No marker is left in the text: the image became a figure link.
            assert not MARKER.search(text)
            assert text.count("![image](figures/") == len(blocks)
            assert len(record["attributes"]["figures"]) == len(blocks)
        elif fmt == "paddleocr-vl":
            assert "$ E=mc^{2} $" in text and "\\(" not in text
        elif fmt == "glm-ocr":
            assert any(b.label is BlockLabel.FORMULA for page in blocks for b in page)
            assert "<td>42</td>" in text
        else:
            assert any(b.label is BlockLabel.TABLE for page in blocks for b in page)
            assert all(b.bbox is None for page in blocks for b in page)
