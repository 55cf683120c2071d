"""Lines the detector ran together at its scale, or passed over, are detected again closer
up (``engines/line_detection.py``, ``engines/missed_text.py``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pypdfium2 as pdfium
import pytest
from PIL import Image, ImageDraw, ImageFont

import ocrflow.engines.line_detection as line_detection
from ocrflow.engines.embedded import EmbeddedEngine
from ocrflow.engines.line_detection import line_bands
from ocrflow.engines.missed_text import missed_rows


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
    monkeypatch.setattr(line_detection, "closer_where_unsure", lambda *args: args[2])
    unfixed = engine.recognize(scan).text
    assert not all(part in unfixed for part in terms)


WORDS = ("contract", "party", "agreement", "liability", "warranty", "notice", "clause")


ROWS = range(200, 2400, 80)


def _notes_under_text(note_px: int = 22) -> tuple[np.ndarray, list[str]]:
    """A 300-dpi letter page of 10 pt lines and, under them, six lines of 5 pt notes set
    solid; the notes' lines."""
    page = Image.new("RGB", (2480, 3508), "white")
    draw = ImageDraw.Draw(page)
    body = ImageFont.load_default(size=40)
    for i, row in enumerate(ROWS):
        draw.text((200, row), f"Body line {i} of the agreement between the parties", "black", body)
    small = ImageFont.load_default(size=note_px)
    notes = []
    for i in range(6):
        note = f"Note{i} " + " ".join(WORDS[(i + k) % len(WORDS)] for k in range(12))
        draw.text((200, 3000 + i * round(note_px * 1.15)), note, "black", small)
        notes.append(note)
    return np.ascontiguousarray(np.asarray(page)[:, :, ::-1]), notes


def test_text_no_box_covers_is_found_and_covered_text_is_not() -> None:
    bgr, _ = _notes_under_text()
    ink = bgr[:, :, 0] < 128
    body = np.array(
        [
            [[190, y - 5], [2300, y - 5], [2300, y + 50], [190, y + 50]]
            for y in range(200, 2400, 80)
        ],
        np.float32,
    )
    rows = missed_rows(ink, body)
    assert len(rows) == 6  # the notes, line by line, and nothing else
    assert all(2990 <= top < bottom <= 3160 for top, bottom, _ in rows)
    notes = np.array([[[190, 2990], [2300, 2990], [2300, 3160], [190, 3160]]], np.float32)
    assert missed_rows(ink, np.concatenate([body, notes])) == []
    # Scanner noise alone is no text.
    specks = np.random.default_rng(0).random(ink.shape) < 0.002
    assert missed_rows(specks, body) == []


def test_notes_too_small_for_the_detector_s_scale_are_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bgr, notes = _notes_under_text()
    engine = EmbeddedEngine(threads=1)
    text = engine.recognize_array(bgr[:, :, ::-1]).text
    words = set(text.split())
    assert all(sum(w in words for w in note.split()[1:]) >= 10 for note in notes), text[-800:]
    # What it is for: at the scale the 10 pt text asks for, the detector sees no notes.
    monkeypatch.setattr(line_detection, "closer_where_unsure", lambda *args: args[2])
    unfixed = engine.recognize_array(bgr[:, :, ::-1]).text
    assert "liability warranty notice" not in unfixed
