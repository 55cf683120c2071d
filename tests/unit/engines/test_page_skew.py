"""Both CPU engines measure how far a page's lines run askew (``Page.skew``, which the
searchable PDF's ``--deskew`` straightens by)."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pypdfium2 as pdfium
import pytest
from PIL import Image

from ocrflow.engines.embedded import EmbeddedEngine
from ocrflow.engines.tesseract import TesseractEngine
from ocrflow.engines.tesseract_tsv import line_skew
from ocrflow.render.pdf import render_pdf_page
from ocrflow.types import Word

CORPUS = Path(__file__).resolve().parents[3] / ".." / "shared" / "corpus"
#: The corpus's skewed scan: the level one (linn) placed at a turn of about 1.9 degrees.
SKEWED, LEVEL = "ocrmypdf__skew", "ocrmypdf__linn"

needs_tesseract = pytest.mark.skipif(
    shutil.which("tesseract") is None,
    reason="[needs tesseract] the tesseract binary is not installed (scripts/system-deps.sh)",
)


def _page(name: str) -> Image.Image:
    pdf = pdfium.PdfDocument(CORPUS / "pdfs" / f"{name}.pdf")
    try:
        return render_pdf_page(pdf[0], scale=200 / 72, max_page_points=1e5, max_pixels=10**8)
    finally:
        pdf.close()


def _words_along(slope_degrees: float, count: int, y: float) -> list[Word]:
    slope = math.tan(math.radians(slope_degrees))
    words = []
    for i in range(count):
        x0 = 0.1 + i * 0.1
        top = y + slope * (x0 + 0.04) * (1000 / 800)  # 1000 px wide, 800 px high
        words.append(Word(f"w{i}", (x0, top, x0 + 0.08, top + 0.02)))
    return words


def test_line_skew_is_the_median_slope_of_the_words_centres() -> None:
    lines = [_words_along(2.0, 6, 0.1), _words_along(2.0, 5, 0.3), _words_along(-8.0, 4, 0.6)]
    assert line_skew(lines, 1000, 800) == pytest.approx(2.0, abs=0.05)
    assert line_skew([_words_along(3.0, 2, 0.1)], 1000, 800) == 0.0  # two words: no slope


def test_the_embedded_engine_measures_the_skew() -> None:
    engine = EmbeddedEngine()
    assert 1.5 < engine.recognize(_page(SKEWED)).skew < 2.3
    assert abs(engine.recognize(_page(LEVEL)).skew) < 0.3


@needs_tesseract
def test_tesseract_measures_the_skew() -> None:
    engine = TesseractEngine()
    skewed, level = (_page(name).convert("RGB") for name in (SKEWED, LEVEL))
    assert 1.5 < engine.read(_ppm(skewed)).skew < 2.3
    assert abs(engine.read(_ppm(level)).skew) < 0.3


def _ppm(image: Image.Image) -> bytes:
    from ocrflow.engines.tesseract import page_file_bytes
    from ocrflow.types import PageImage

    return page_file_bytes(PageImage(image.tobytes(), image.width, image.height, "raw", "RGB"))
