"""OCRmyPDF's output flags on the real ``ocrflow run``: ``--sidecar --pdfa --rotate-pages``
on a generated scan whose second page lies sideways (its text turned 90 degrees
counter-clockwise, so it reads after a quarter turn clockwise).

- ``txt/<rel>.txt`` holds each page's text, pages apart by a form feed;
- ``pdf/<rel>.pdf`` is PDF/A-2b as far as qpdf and pikepdf can tell
  (``test_pdfa_rotate.assert_pdfa_2b``), with the input's image streams byte for byte;
- each page's ``/Rotate`` is the turn the engine recorded for it (both engines find the
  sideways page: Tesseract by its orientation check of a page it read unsure), the page
  now renders upright and its words extract in reading order.
"""

from __future__ import annotations

import difflib
import re
import subprocess
from collections import Counter
from pathlib import Path

import pikepdf
import pytest
from PIL import Image, ImageDraw, ImageFont

from ocrflow import results
from tests.integration.cli_helpers import ocrflow
from tests.needs import need_tesseract
from tests.unit.sinks.test_pdfa_rotate import (
    assert_pdfa_2b,
    gray_scan_pdf,
    image_streams,
    shown_turn,
)

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
LINES = (
    "Quarterly revenue rose sharply",
    "while operating costs fell",
    "by twelve percent in March",
    "according to the annual report",
)
DPI = 200


def tokens(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def upright_page() -> Image.Image:
    """A letter page of text at 200 dpi."""
    page = Image.new("L", (1700, 2200), 255)
    draw = ImageDraw.Draw(page)
    font = ImageFont.truetype(FONT, 48)
    for row, text in enumerate(LINES):
        draw.text((160, 220 + 110 * row), text, font=font, fill=0)
    return page


def similar(found: list[str], expected: list[str]) -> float:
    return difflib.SequenceMatcher(None, found, expected).ratio()


@pytest.mark.parametrize("engine", ["tesseract", "embedded"])
def test_sidecar_pdfa_and_rotate_pages(tmp_path: Path, engine: str) -> None:
    if engine == "tesseract":
        need_tesseract()
    inputs = tmp_path / "in"
    inputs.mkdir()
    upright = upright_page()
    source = inputs / "scan.pdf"
    gray_scan_pdf(source, [upright, upright.rotate(90, expand=True)], DPI)
    out = tmp_path / "out"
    flags = ("--format", "pdf", "--sidecar", "--pdfa", "--rotate-pages", "-q")
    done = ocrflow("run", str(inputs), "-o", str(out), "--engine", engine, *flags)
    assert done.returncode == 0, done.stderr[-3000:]
    expected = tokens(" ".join(LINES))

    sidecar = (out / "txt" / "scan.pdf.txt").read_text("utf-8")
    pages = sidecar.split("\f")
    assert len(pages) == 2 and not sidecar.endswith("\f")
    assert similar(tokens(pages[0]), expected) > 0.9, pages[0]

    pdf = out / "pdf" / "scan.pdf.pdf"
    assert_pdfa_2b(pdf)
    (document,) = results(out)
    turns = [page.rotation for page in document.pages]
    with pikepdf.open(source) as before, pikepdf.open(pdf) as after:
        assert image_streams(after) == image_streams(before)
        assert [int(p.obj.get("/Rotate", 0)) for p in after.pages] == turns
    assert turns == [0, 90]
    if turns[1] == 90:  # found sideways: shown upright, read in order
        data = pdf.read_bytes()
        assert shown_turn(data, upright, index=0) == 0
        assert shown_turn(data, upright, index=1) == 0
        assert similar(tokens(pages[1]), expected) > 0.9, pages[1]
        text = subprocess.run(
            ["pdftotext", "-f", "2", "-l", "2", str(pdf), "-"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        assert similar(tokens(text), expected) > 0.9, text


CORPUS = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus"


@pytest.mark.parametrize("engine", ["embedded", "tesseract"])
def test_deskew_straightens_the_page_and_keeps_the_scan(tmp_path: Path, engine: str) -> None:
    # The corpus's skewed scan: a 300-dpi brochure placed about 1.9 degrees askew.
    import pypdfium2 as pdfium

    from ocrflow.engines.embedded import EmbeddedEngine

    if engine == "tesseract":
        need_tesseract()
    source = CORPUS / "pdfs" / "ocrmypdf__skew.pdf"
    out = tmp_path / "out"
    flags = ("--format", "pdf,markdown", "--deskew", "--engine", engine, "-q")
    done = ocrflow("run", str(source), "-o", str(out), *flags)
    assert done.returncode == 0, done.stderr[-3000:]
    (document,) = results(out)
    assert 1.5 < document.pages[0].skew < 2.3
    pdf = out / "pdf" / "ocrmypdf__skew.pdf.pdf"
    assert subprocess.run(["qpdf", "--check", str(pdf)], capture_output=True).returncode == 0
    with pikepdf.open(source) as before, pikepdf.open(pdf) as after:
        assert image_streams(after) == image_streams(before)

    def measured(path: Path) -> float:
        rendered = pdfium.PdfDocument(path)[0].render(scale=150 / 72).to_pil()
        return EmbeddedEngine().recognize(rendered).skew

    assert measured(source) > 1.5
    assert abs(measured(pdf)) < 0.4  # shown level now
    # The text is laid level over the words where they now show: pdftotext finds them
    # (its own reading order, so as a bag of words; level text on a level page).
    markdown = Counter(tokens((out / "markdown" / "ocrmypdf__skew.pdf.md").read_text()))
    text = subprocess.run(
        ["pdftotext", str(pdf), "-"], capture_output=True, text=True, check=True
    ).stdout
    assert sum((Counter(tokens(text)) & markdown).values()) >= 0.9 * sum(markdown.values())
