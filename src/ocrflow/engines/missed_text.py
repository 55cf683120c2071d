"""Rows of a page where ink looks like text that the detector found no box for.

Type a third of the page's median size (5 pt notes under 10 pt text, a form's small
print) comes out 3-5 px high at the scale the page's own text asks of the detector, and
the detector passes over it. Its ink is still on the page: what no box covers is taken
(on a copy at most ``WORK_WIDTH`` wide), character-like blobs are kept (not specks, not
taller than the page's lines, no wider than ``MAX_ASPECT`` of their height, inked enough
to be strokes), and smeared across by their height, as a line's letters run into one
another. A smear ``MIN_LINE_ASPECT`` times as long as high, of ``MIN_CHARACTERS`` blobs,
is a line of text left out; its rows are detected again closer up
(``line_detection.py``). 10-20 ms a 300-dpi page.
"""

from __future__ import annotations

import numpy as np

from ocrflow.engines.geometry import Quads

#: The ink is looked at on a copy at most this wide.
WORK_WIDTH = 1300
#: A box covers this share of its height around it (the detector's boxes are tight).
COVER = 0.3
#: A character-like blob: at least this many pixels high on the copy ...
MIN_PX = 3
#: ... at most this many times as wide as high, at least this share of its box inked ...
MAX_ASPECT = 4.0
MIN_FILL = 0.15
#: A left-out line: this many times as long as high, of this many blobs at least.
MIN_LINE_ASPECT = 8.0
MIN_CHARACTERS = 6


def missed_rows(ink: np.ndarray, quads: Quads) -> list[tuple[int, int, int]]:
    """Row ranges (top, bottom, margin to detect beyond them) of ``ink`` (a page's inked
    pixels) holding lines of text that none of ``quads`` covers."""
    import cv2  # installed with rapidocr, as the models are

    if len(quads) == 0 or ink.size == 0:
        return []
    step = max(1, -(-ink.shape[1] // WORK_WIDTH))
    small = ink[::step, ::step]
    heights = quads[:, :, 1].max(axis=1) - quads[:, :, 1].min(axis=1)
    tallest = float(np.median(heights)) / step  # text as large as the page's was found
    covered = np.zeros(small.shape, np.uint8)
    for quad, height in zip(quads / step, heights / step, strict=True):
        x0, y0 = np.floor(quad.min(axis=0) - COVER * height).astype(int)
        x1, y1 = np.ceil(quad.max(axis=0) + COVER * height).astype(int)
        covered[max(0, y0) : max(0, y1), max(0, x0) : max(0, x1)] = 1
    rest = (small & (covered == 0)).astype(np.uint8)
    _, labels, stats, centres = cv2.connectedComponentsWithStats(rest, connectivity=8)
    w, h, area = stats[:, cv2.CC_STAT_WIDTH], stats[:, cv2.CC_STAT_HEIGHT], stats[:, 4]
    like = (h >= MIN_PX) & (h <= tallest) & (w <= MAX_ASPECT * h) & (area >= MIN_FILL * w * h)
    like[0] = False  # the background
    if int(like.sum()) < MIN_CHARACTERS:
        return []
    characters = like[labels].astype(np.uint8)
    size = float(np.median(h[like]))
    smeared = cv2.dilate(characters, np.ones((1, max(3, round(size))), np.uint8))
    lines, line_labels, line_stats, _ = cv2.connectedComponentsWithStats(smeared, connectivity=8)
    # A blob's middle lies in the smear it made (the smear fills a letter's counter).
    middles = np.round(centres[like]).astype(int)
    middles = np.clip(middles, 0, [small.shape[1] - 1, small.shape[0] - 1])
    members = np.bincount(line_labels[middles[:, 1], middles[:, 0]], minlength=lines)
    rows: list[tuple[int, int, int]] = []
    for label in range(1, lines):
        _, top, width, height, _ = line_stats[label]
        if width >= MIN_LINE_ASPECT * height and members[label] >= MIN_CHARACTERS:
            rows.append((top * step, (top + height) * step, 2 * height * step))
    return rows
