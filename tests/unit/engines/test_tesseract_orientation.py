"""Tesseract reads a turned page: a page read unsure gets its orientation check and is read
again turned (``tesseract_osd.py``), a page read sideways with confidence gets its turn
from its lines; an upright page is read once."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ocrflow.engines.tesseract import TesseractEngine, page_file_bytes
from ocrflow.engines.tesseract_osd import mean_confidence, parse_orientation, sideways_turn
from ocrflow.engines.tesseract_tsv import TsvPage
from ocrflow.render.jobs import PageJob, RenderSpec, render_pages
from ocrflow.types import BBox, Block, BlockLabel, Line, PageImage, Word

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


def _rendered(name: str, number: int = 1) -> PageImage:
    spec = RenderSpec(dpi=300, max_scan_dpi=400, text_layer="off")
    job = PageJob(str(CORPUS / "pdfs" / f"{name}.pdf"), "pdf", (number,), spec)
    (page,) = render_pages(job)
    assert page.image is not None
    return page.image


def _counted(engine: TesseractEngine, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The options of each Tesseract run ``engine`` makes from now on."""
    calls: list[list[str]] = []
    output = engine._output

    def counted(data: bytes, options: list[str]) -> str:
        calls.append(options)
        return output(data, options)

    monkeypatch.setattr(engine, "_output", counted)
    return calls


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
    calls = _counted(engine, monkeypatch)
    page = engine.read_upright(image, page_file_bytes(image))
    assert page.rotation == 0 and len(calls) == 1


@needs_tesseract
def test_a_skewed_page_is_read_level_and_its_boxes_lie_on_the_printed_lines() -> None:
    import math

    from ocrflow.evaluation.metrics import cer

    truth = (CORPUS / "groundtruth" / "ocrmypdf__linn.txt").read_text()
    image = _rendered("ocrmypdf__skew")  # the brochure placed 1.9 degrees askew
    data = page_file_bytes(image)
    level = TesseractEngine().read_upright(image, data)
    askew = TesseractEngine(level_skewed=False).read_upright(image, data)
    assert 1.5 < level.skew < 2.3
    assert cer(truth, level.text) < 0.02 < cer(truth, askew.text)
    # Words were read on the levelled page; their boxes went back onto the printed,
    # sloping lines: along a long line, the centres fall by the page's slope.
    slope = math.tan(math.radians(level.skew))
    long_lines = [
        line
        for block in level.blocks
        for line in block.lines
        if len(line.words) >= 8 and line.words[-1].bbox and line.words[0].bbox
    ]
    assert long_lines
    for line in long_lines:
        first, last = line.words[0].bbox, line.words[-1].bbox
        assert first is not None and last is not None
        dx = ((last[0] + last[2]) - (first[0] + first[2])) / 2 * image.width
        dy = ((last[1] + last[3]) - (first[1] + first[3])) / 2 * image.height
        assert dy == pytest.approx(slope * dx, abs=0.3 * abs(slope * dx) + 3)


@needs_tesseract
@pytest.mark.parametrize(("number", "turn", "reads"), [(3, 270, 1), (4, 90, 3)])
def test_a_sideways_page_read_with_confidence_gets_its_turn_from_its_lines(
    number: int, turn: int, reads: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Pages 3 and 4 carry /Rotate 90 and 270, so they are shown turned. Tesseract reads
    # page 3's columns of words with confidence, and the turn comes from which way its
    # lines run, with no second reading; page 4 reads unsure, and is checked and read again.
    image = _rendered("docling__nemotron_multipage", number)
    engine = TesseractEngine()
    calls = _counted(engine, monkeypatch)
    page = engine.read_upright(image, page_file_bytes(image))
    assert page.text.startswith("Docling bundles PDF document conversion")
    assert page.rotation == turn and len(calls) == reads
    # Either way, the boxes are on the page as given, and tell the same turn.
    assert sideways_turn(page, image.width, image.height) == turn
    plain = TesseractEngine(detect_rotation=False).read_upright(image, page_file_bytes(image))
    assert plain.rotation == 0


def _column_page(words: list[tuple[str, BBox]]) -> TsvPage:
    line = Line(text=" ".join(w for w, _ in words), words=tuple(Word(w, bbox=b) for w, b in words))
    block = Block(text=line.text, label=BlockLabel.TEXT, lines=(line,))
    return TsvPage(text=line.text, blocks=(block,))


def test_sideways_turn_reads_the_way_the_lines_run() -> None:
    down = [("Docling", (0.8, 0.10, 0.9, 0.2)), ("bundles", (0.8, 0.25, 0.9, 0.35))]
    up = [("Docling", (0.1, 0.8, 0.2, 0.9)), ("bundles", (0.1, 0.65, 0.2, 0.75))]
    across = [("Docling", (0.1, 0.1, 0.2, 0.12)), ("bundles", (0.25, 0.1, 0.35, 0.12))]
    assert sideways_turn(_column_page(down), 1000, 1400) == 270
    assert sideways_turn(_column_page(up), 1000, 1400) == 90
    assert sideways_turn(_column_page(across), 1000, 1400) == 0
    # Japanese printed in columns is upright: vertical writing, not a turned page.
    tategaki = [("縦書き", (0.8, 0.10, 0.9, 0.2)), ("の文章", (0.8, 0.25, 0.9, 0.35))]
    assert sideways_turn(_column_page(tategaki), 1000, 1400) == 0
