"""Lines the detector ran together at its scale are detected again closer up
(``engines/line_detection.py``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pypdfium2 as pdfium
import pytest
from PIL import Image

import ocrflow.engines.line_detection as line_detection
from ocrflow.engines.embedded import EmbeddedEngine
from ocrflow.engines.line_detection import line_bands


def _line(rows: int = 20) -> list[float]:
    """A text line's row profile: ascenders, a dense x-height band, descenders."""
    return [0.05] * 4 + [0.6] * (rows - 8) + [0.05] * 4


def test_two_lines_in_one_box_show_two_bands() -> None:
    profile = np.array([0.0, *_line(), 0.0, 0.0, *_line(), 0.0])
    assert len(line_bands(profile)) == 2


def test_a_line_with_its_neighbours_edges_is_one_band() -> None:
    # The line above's descenders and a rule caught at the box's top: one line.
    profile = np.array([0.5, 0.5, 0.0, *_line(), 0.0])
    assert len(line_bands(profile)) == 1
    assert len(line_bands(np.array(_line()))) == 1
    assert line_bands(np.zeros(12)) == []
    assert line_bands(np.array([0.5])) == []


def scanned(pdf: Path) -> Image.Image:
    """The PDF's first page as a scanner gives it back: 300 dpi, grey, noisy, tilted 0.4°."""
    page = pdfium.PdfDocument(pdf)[0]
    grey = page.render(scale=300 / 72, grayscale=True).to_pil().convert("L")
    noise = np.random.default_rng(0).normal(0.0, 12.0, (grey.height, grey.width))
    noisy = Image.fromarray(np.clip(np.asarray(grey, np.float32) + noise, 0, 255).astype(np.uint8))
    return noisy.rotate(0.4, resample=Image.Resampling.BILINEAR, fillcolor=255)


def test_fine_print_set_solid_is_read_line_by_line(
    corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A certificate's terms: four lines of 5 pt type a pixel or two apart at the detector's
    # scale (the page's body text asks for 0.46 of a 300-dpi page).
    scan = scanned(corpus / "pdfs" / "olmocr__lots_of_sci_tables.pdf")
    engine = EmbeddedEngine(threads=1)
    terms = ("good faith", "no longer valid", "Terms and Conditions", "reproduction either")
    text = engine.recognize(scan).text
    assert all(part in text for part in terms), text[-1200:]
    # What it is for: without the second look, two of the lines come out as one.
    monkeypatch.setattr(line_detection, "closer_where_run_together", lambda *args: args[2])
    unfixed = engine.recognize(scan).text
    assert not all(part in unfixed for part in terms)
