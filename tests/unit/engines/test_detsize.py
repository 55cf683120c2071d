"""The detector's input size follows the page's text height (``engines/detsize.py``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from ocrflow.engines import detsize
from ocrflow.engines.embedded import EmbeddedEngine


def _bgr(image: Image.Image) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(image.convert("RGB"))[:, :, ::-1])


def _typed_page(size_px: int, side: int = 2400) -> np.ndarray:
    """A white page of lines of ``size_px`` px type, as a BGR array."""
    page = Image.new("RGB", (side * 3 // 4, side), "white")
    draw = ImageDraw.Draw(page)
    font = ImageFont.load_default(size=size_px)
    for row in range(40, side - 2 * size_px, size_px * 2):
        draw.text((40, row), "The quick brown fox jumps over the lazy dog 0123", "black", font)
    return _bgr(page)


def test_the_measured_height_follows_the_type_size() -> None:
    small, large = (detsize.text_height(_typed_page(size)) for size in (20, 40))
    assert small is not None and large is not None
    # Characters' median height (x-height to cap height) scales with the type.
    assert 0.35 * 20 < small < 20
    assert 1.5 < large / small < 2.3


def test_the_same_page_twice_as_large_measures_twice_as_high(corpus: Path) -> None:
    with Image.open(corpus / "images" / "ocrmypdf__linn.png") as image:
        page = image.convert("RGB")
    double = page.resize((page.width * 2, page.height * 2), Image.Resampling.LANCZOS)
    once, twice = detsize.text_height(_bgr(page)), detsize.text_height(_bgr(double))
    assert once is not None and twice is not None
    assert 1.7 < twice / once < 2.3


def test_large_type_is_detected_smaller_and_small_type_keeps_its_pixels() -> None:
    big_type, small_type = _typed_page(60, 3300), _typed_page(12, 3300)
    height = detsize.text_height(big_type)
    assert height is not None
    # The type at 13 px: about a third of the page's 3300 px, well under the 1600 cap.
    assert detsize.detector_side(big_type, 1600, 13.0) == round(3300 * 13 / height) < 1400
    assert detsize.detector_side(_typed_page(100, 3300), 1600, 13.0) == detsize.MIN_SIDE
    assert detsize.detector_side(small_type, 1600, 13.0) == 1600
    # Off, or a page no longer than the floor: the fixed cap, as before.
    assert detsize.detector_side(big_type, 1600, 0.0) == 1600
    assert detsize.detector_side(big_type[:1000, :700], 1600, 13.0) == 1000
    # No text to measure (a blank page): the cap.
    blank = np.full((3000, 2000, 3), 255, np.uint8)
    assert detsize.detector_side(blank, 1600, 13.0) == 1600


def test_boxes_come_back_in_the_pages_own_pixels(corpus: Path) -> None:
    with Image.open(corpus / "images" / "tesseract__phototest.tif") as image:
        page = image.convert("RGB")
    large = page.resize((page.width * 2, page.height * 2), Image.Resampling.LANCZOS)
    assert detsize.detector_side(_bgr(large), 1600, 13.0) == detsize.MIN_SIDE
    fixed, scaled = (
        EmbeddedEngine(threads=1, det_text_px=text_px).recognize(large) for text_px in (0.0, 13.0)
    )
    assert "quick brown dog" in scaled.text
    assert len(scaled.boxes) == len(fixed.boxes)
    for ours, theirs in zip(scaled.boxes, fixed.boxes, strict=True):
        # Detected at 1024 px instead of 1600, mapped back to the 2576 px page: same place.
        edges = ("x0", "y0", "x1", "y1")
        assert all(abs(getattr(ours, e) - getattr(theirs, e)) < 8 for e in edges)
