"""Text lines of a page: the detector run at the scale the page's text asks for, and again,
closer up, on rows whose lines it ran together or passed over.

A page is detected shrunk to the size its median text height asks for (``detsize.py``).
Fine print set solid (the terms under an invoice, a contract's small print, a form's notes)
then keeps a pixel or two between its lines, and the detector's boxes run two lines into
one: the recogniser reads one of them and the other is lost. Such a box shows it in its
ink: two bands of dense rows (each line's x-height) of like height, with a near-empty row
between them. The rows of the page around such boxes are detected again at
``CLOSER`` times the scale (at most full size), and the boxes found there replace the first
ones. Type smaller still (5 pt notes under 10 pt text) is passed over altogether; its
rows, found from the ink that no box covers (``missed_text.py``), are detected again the
same way. Costs: a row profile per box and a look at the ink left over (10-30 ms a page),
and a detector run on those rows only where a box is found run together or text left out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ocrflow.engines.detsize import detector_side
from ocrflow.engines.geometry import Quads
from ocrflow.engines.missed_text import missed_rows

if TYPE_CHECKING:
    from ocrflow.engines.ppocr import PpocrModels

#: The second look's scale, as a multiple of the first one's.
CLOSER = 2.0
#: A row is in a band of dense ink at this share of the box's densest row, and between two
#: bands when under ``GAP_INK`` of it.
DENSE_INK = 0.5
GAP_INK = 0.2
#: A band counts as a line's x-height when at least this share of the tallest band's height
#: (less: a neighbouring line's descenders or a rule caught at the box's edge) and 3 px.
LIKE_HEIGHT = 0.5
MIN_BAND_PX = 3
#: Boxes that overlap a kept one more than this (of the smaller) are the same line again.
SAME_LINE = 0.5


def detect_lines(models: PpocrModels, bgr: np.ndarray, max_side: int, text_px: float) -> Quads:
    """Line quads of ``bgr`` in its own pixels. A strip far wider than tall (one text line)
    is padded first, because the detector misses text that fills the whole height of its
    input; a page is detected at the size that makes its text ``text_px`` high, at most
    ``max_side`` (``detsize.py``), and its lines run together or passed over are detected
    again closer up (the module docstring)."""
    height, width = bgr.shape[:2]
    pad = max(0, (max(width // 8, 32) - height) // 2)
    if pad:
        quads = models.detect(np.pad(bgr, ((pad, pad), (0, 0), (0, 0)), mode="edge"))
        quads[:, :, 1] = np.clip(quads[:, :, 1] - pad, 0, height)
        return quads
    side = detector_side(bgr, max_side, text_px)
    scale = min(1.0, side / max(height, width))
    quads = detect_scaled(models, bgr, scale)
    if scale >= 1.0 or len(quads) == 0:
        return quads
    return closer_where_unsure(models, bgr, quads, min(1.0, scale * CLOSER))


def detect_scaled(models: PpocrModels, bgr: np.ndarray, scale: float) -> Quads:
    """Line quads of ``bgr`` detected at ``scale`` of its size, in ``bgr``'s pixels."""
    if scale >= 1.0:
        return models.detect(bgr, side_limit=max(bgr.shape[:2]))
    import cv2  # installed with rapidocr, as the models are

    height, width = bgr.shape[:2]
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    quads = models.detect(cv2.resize(bgr, size, interpolation=cv2.INTER_AREA), side_limit=max(size))
    quads[:, :, 0] *= width / size[0]
    quads[:, :, 1] *= height / size[1]
    return quads


def closer_where_unsure(models: PpocrModels, bgr: np.ndarray, quads: Quads, scale: float) -> Quads:
    """``quads`` with those in rows of ``bgr`` where boxes hold two lines, or where text
    has no box (``missed_text.py``), replaced by the boxes the detector finds there at
    ``scale``."""
    from ocrflow.engines.ppocr_det import sorted_rows  # brings OpenCV, as the models do

    ink = _ink(bgr)
    rows = _merged([*_run_together_rows(ink, quads), *missed_rows(ink, quads)])
    if not rows:
        return quads
    kept = quads
    for top, bottom, margin in rows:
        crop_top, crop_bottom = max(0, top - margin), min(bgr.shape[0], bottom + margin)
        found = detect_scaled(models, bgr[crop_top:crop_bottom], scale)
        found[:, :, 1] += crop_top
        middles = kept[:, :, 1].mean(axis=1)
        kept = kept[(middles < top) | (middles >= bottom)]
        found_middles = found[:, :, 1].mean(axis=1)
        found = found[(found_middles >= top) & (found_middles < bottom)]
        found = found[[not _overlaps_any(quad, kept) for quad in found]]
        kept = np.concatenate([kept, found.astype(kept.dtype)])
    return sorted_rows(kept)


def _ink(bgr: np.ndarray) -> np.ndarray:
    """Inked pixels of ``bgr``: darker than Otsu's threshold of a small grey copy."""
    import cv2

    gray = cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY)
    height, width = gray.shape
    factor = min(1.0, 1024 / max(height, width))
    small = cv2.resize(gray, (max(1, round(width * factor)), max(1, round(height * factor))))
    threshold, _ = cv2.threshold(small, 0, 255, cv2.THRESH_BINARY + cv2.THRESH_OTSU)
    return gray < threshold


def _run_together_rows(ink: np.ndarray, quads: Quads) -> list[tuple[int, int, int]]:
    """Row ranges (top, bottom, margin to detect beyond them) holding boxes of two lines."""
    ranges: list[tuple[int, int, int]] = []
    for quad in quads:
        x0, y0 = np.floor(quad.min(axis=0)).astype(int)
        x1, y1 = np.ceil(quad.max(axis=0)).astype(int)
        x0, y0 = max(0, x0), max(0, y0)
        if y1 - y0 >= x1 - x0 or y1 <= y0:
            continue  # a column of text standing up, or nothing
        if len(line_bands(ink[y0:y1, x0:x1].mean(axis=1))) >= 2:
            ranges.append((y0, y1, y1 - y0))
    return ranges


def _merged(ranges: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """Row ranges (top, bottom, margin) whose crops (the range and its margin) meet made
    one: however many ranges a page has, the detector looks at its rows once at most."""
    merged: list[tuple[int, int, int]] = []
    for top, bottom, margin in sorted(ranges):
        if merged and top - margin <= merged[-1][1] + merged[-1][2]:
            last = merged[-1]
            merged[-1] = (last[0], max(last[1], bottom), max(last[2], margin))
        else:
            merged.append((top, bottom, margin))
    return merged


def line_bands(profile: np.ndarray) -> list[tuple[int, int]]:
    """Bands of dense ink in a box's row ``profile`` (share of each row inked) that look
    like lines' x-heights: rows at ``DENSE_INK`` of the densest, told apart by a row under
    ``GAP_INK``, as tall as ``LIKE_HEIGHT`` of the tallest band."""
    if profile.size < 3 or profile.max() <= 0:
        return []
    smooth = np.convolve(profile, np.ones(3) / 3, mode="same")
    dense = smooth >= DENSE_INK * smooth.max()
    gap = smooth < GAP_INK * smooth.max()
    edges = np.flatnonzero(np.diff(np.concatenate(([0], dense.astype(np.int8), [0]))))
    bands: list[tuple[int, int]] = []
    for start, end in zip(edges[::2], edges[1::2], strict=True):
        if bands and not gap[bands[-1][1] : start].any():
            bands[-1] = (bands[-1][0], int(end))  # no empty row between: one band
        else:
            bands.append((int(start), int(end)))
    tallest = max(end - start for start, end in bands)
    least = max(MIN_BAND_PX, LIKE_HEIGHT * tallest)
    return [(start, end) for start, end in bands if end - start >= least]


def _overlaps_any(quad: np.ndarray, others: Quads) -> bool:
    """Whether ``quad``'s box overlaps one of ``others``' by ``SAME_LINE`` of the smaller."""
    if len(others) == 0:
        return False
    (x0, y0), (x1, y1) = quad.min(axis=0), quad.max(axis=0)
    ox0, oy0 = others[:, :, 0].min(axis=1), others[:, :, 1].min(axis=1)
    ox1, oy1 = others[:, :, 0].max(axis=1), others[:, :, 1].max(axis=1)
    width = np.clip(np.minimum(x1, ox1) - np.maximum(x0, ox0), 0, None)
    height = np.clip(np.minimum(y1, oy1) - np.maximum(y0, oy0), 0, None)
    smaller = np.minimum((x1 - x0) * (y1 - y0), (ox1 - ox0) * (oy1 - oy0))
    return bool(np.any(width * height > SAME_LINE * np.maximum(smaller, 1e-6)))
