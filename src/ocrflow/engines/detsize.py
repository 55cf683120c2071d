"""The detector's input size, from the page's text height.

The text detector's cost grows with its input's pixels, and what it needs is text of a
readable height, not a page of a given size: large print, or a page scanned at 300 dpi,
can be detected much smaller than the fixed 1600 px cap, while small print must keep every
pixel it has. So the text height is estimated first (connected components of the inked
pixels on a small grey copy, a few milliseconds) and the detector's input is scaled to give
the median character ``EmbeddedOptions.det_text_px`` pixels, between ``MIN_SIDE`` and the engine's
``det_side``. The recogniser is not affected: it crops the lines from the full page.
"""

from __future__ import annotations

import numpy as np

#: Never below this: at 960 px a line box of phototest moved enough to misread a word
#: ("ovér"), at 1024 none did (docs/embedded-engine.md).
MIN_SIDE = 1024
#: The text height is measured on a copy at most this long.
PROBE_SIDE = 1024
#: Fewer character-like components than this: no estimate (a strip, a picture).
MIN_COMPONENTS = 20


def text_height(bgr: np.ndarray) -> float | None:
    """Median height in pixels of ``bgr``'s character-like ink blobs, or ``None`` when the
    page has too few of them to tell."""
    import cv2

    height, width = bgr.shape[:2]
    factor = min(1.0, PROBE_SIDE / max(height, width))
    small = bgr
    if factor < 1.0:
        size = (max(1, round(width * factor)), max(1, round(height * factor)))
        small = cv2.resize(bgr, size, interpolation=cv2.INTER_AREA)
    gray = cv2.cvtColor(small, cv2.COLOR_BGR2GRAY)
    _, ink = cv2.threshold(gray, 0, 255, cv2.THRESH_BINARY_INV + cv2.THRESH_OTSU)
    _, _, stats, _ = cv2.connectedComponentsWithStats(ink, connectivity=8)
    heights = stats[1:, cv2.CC_STAT_HEIGHT]
    widths = stats[1:, cv2.CC_STAT_WIDTH]
    areas = stats[1:, cv2.CC_STAT_AREA]
    # Characters: not specks, not rules or pictures (at most a tenth of the page high,
    # four heights wide), not empty frames (at least 15 % of their box inked).
    kept = (
        (heights >= 3)
        & (heights <= gray.shape[0] / 10)
        & (widths <= 4 * heights)
        & (areas >= 0.15 * heights * widths)
    )
    if int(kept.sum()) < MIN_COMPONENTS:
        return None
    return float(np.median(heights[kept])) / factor


def detector_side(bgr: np.ndarray, max_side: int, text_px: float) -> int:
    """Longest side of the detector's input for ``bgr``: its text ``text_px`` high, within
    ``MIN_SIDE`` and ``max_side``, never more than the page has (``text_px`` 0: the cap)."""
    longest = max(bgr.shape[:2])
    if text_px <= 0 or longest <= MIN_SIDE:
        return min(longest, max_side)  # nothing to gain: skip the estimate
    measured = text_height(bgr)
    if measured is None:
        return min(longest, max_side)
    wanted = round(longest * text_px / measured)
    return min(longest, max_side, max(MIN_SIDE, wanted))
