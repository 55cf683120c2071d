"""Tesseract reads a turned page: a page read unsure gets its orientation check and is read
again turned (``tesseract_osd.py``); an upright page is read once."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ocrflow.engines.tesseract import TesseractEngine, page_file_bytes
from ocrflow.engines.tesseract_osd import mean_confidence, parse_orientation
from ocrflow.render.jobs import PageJob, RenderSpec, render_pages
from ocrflow.types import PageImage

CORPUS = Path(__file__).resolve().parents[3] / ".." / "shared" / "corpus"

needs_tesseract = pytest.mark.skipif(
    shutil.which("tesseract") is None,
    reason="[needs tesseract] the tesseract binary is not installed (scripts/system-deps.sh)",
)

OSD = """Page number: 0
Orientation in degrees: 270
Rotate: {turn}
Orientation confidence: {confidence}
Script: Latin
"""


@pytest.mark.parametrize(
    ("turn", "confidence", "expected"),
    [(90, 3.1, 90), (180, 2.7, 180), (270, 14.0, 270), (0, 9.0, 0), (90, 0.4, 0)],
)
def test_parse_orientation(turn: int, confidence: float, expected: int) -> None:
    assert parse_orientation(OSD.format(turn=turn, confidence=confidence)) == expected
    assert parse_orientation("Too few characters. Skipping this page") == 0


def _rendered(name: str) -> PageImage:
    spec = RenderSpec(dpi=300, max_scan_dpi=400, text_layer="off")
    (page,) = render_pages(PageJob(str(CORPUS / "pdfs" / f"{name}.pdf"), "pdf", (1,), spec))
    assert page.image is not None
    return page.image


@needs_tesseract
@pytest.mark.parametrize(
    ("name", "turn"),
    [("docling__ocr_test_rotated_90", 90), ("docling__ocr_test_rotated_180", 180)],
)
def test_a_turned_page_is_read_upright(name: str, turn: int) -> None:
    image = _rendered(name)
    engine = TesseractEngine()
    page = engine.read_upright(image, page_file_bytes(image))
    assert page.rotation == turn
    assert page.text.startswith("Docling bundles PDF document conversion")
    assert mean_confidence(page) > 85
    # Boxes are on the page as given (turned): a sideways page's lines stand upright.
    (first, *_) = page.blocks
    assert first.bbox is not None
    x0, y0, x1, y1 = first.bbox
    assert ((y1 - y0) > (x1 - x0)) is (turn == 90)
    plain = TesseractEngine(detect_rotation=False).read_upright(image, page_file_bytes(image))
    assert plain.rotation == 0 and "Docling" not in plain.text


@needs_tesseract
def test_an_upright_page_is_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    image = _rendered("ocrmypdf__linn")
    engine = TesseractEngine()
    calls: list[list[str]] = []
    output = engine._output

    def counted(data: bytes, options: list[str]) -> str:
        calls.append(options)
        return output(data, options)

    monkeypatch.setattr(engine, "_output", counted)
    page = engine.read_upright(image, page_file_bytes(image))
    assert page.rotation == 0 and len(calls) == 1
