"""Where a detected line's ink is, across: the detector pads its boxes, the print is not.

The detector's box runs about a quarter of a line height past the ink at both ends. The
reading order's thresholds are measured on such boxes and stay so; what the document model
keeps (and every output draws: the searchable PDF's text layer, hOCR, ALTO) is the line
as printed: each line's ends are moved in to its ink, ``PAD`` line heights beyond it. A
text extractor reading the searchable PDF then finds a gutter as wide as the printed one
(docs/searchable-pdf.md). Pure functions over the page's pixels, no I/O.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from ocrflow.engines.layout import Paragraph, TextBox

#: Share of a box's height, from its top and bottom, left out when its ink is looked for:
#: the detector's box takes in some of the lines above and below at its edges.
EDGE = 0.25
#: Room left beyond the ink at each end, in line heights.
PAD = 0.1
#: Darkest and lightest pixels of a box closer than this: nothing to tell ink by.
MIN_CONTRAST = 32


def inked_columns(
    bgr: np.ndarray, box: tuple[float, float, float, float]
) -> tuple[int, np.ndarray] | None:
    """The first pixel column of ``box`` (x0, y0, x1, y1) in the image, and for each of its
    columns from there whether the middle of the box (``EDGE`` off its top and bottom) has
    ink; None when the box is empty in the image or shows no contrast."""
    x0, y0, x1, y1 = box
    tall = y1 - y0
    top, bottom = max(round(y0 + EDGE * tall), 0), min(round(y1 - EDGE * tall), bgr.shape[0])
    start, stop = max(round(x0), 0), min(round(x1), bgr.shape[1])
    if bottom <= top or stop - start < 2:
        return None
    strip = bgr[top:bottom, start:stop]
    if strip.ndim == 3:  # the darkest channel: ink in any colour (pairwise: a reduction
        # over three channels is several times slower)
        strip = np.minimum(np.minimum(strip[..., 0], strip[..., 1]), strip[..., 2])
    # Every third column of every other row tells paper from ink as well, in a sixth of
    # the time (the percentiles sort what they are given).
    dark, light = np.percentile(strip[::2, ::3], (1, 99))
    if light - dark < MIN_CONTRAST:
        return None
    inked: np.ndarray = (strip < (dark + light) / 2).any(axis=0)
    return start, inked


def to_ink(box: TextBox, bgr: np.ndarray) -> TextBox:
    """``box`` with its ends moved in to its ink (``PAD`` line heights beyond it); as it was
    when it runs too slanted for its middle to hold its ink end to end, or shows none."""
    tall = box.y1 - box.y0
    if abs(math.tan(box.angle)) * (box.x1 - box.x0) > EDGE * tall:
        return box
    found = inked_columns(bgr, (box.x0, box.y0, box.x1, box.y1))
    if found is None or not found[1].any():
        return box
    start, inked = found
    columns, pad = np.flatnonzero(inked), PAD * box.text_height
    x0 = max(box.x0, start + float(columns[0]) - pad)
    x1 = min(box.x1, start + float(columns[-1]) + 1 + pad)
    return dataclasses.replace(box, x0=x0, x1=x1) if x1 > x0 else box


def to_ink_paragraphs(paragraphs: Sequence[Paragraph], bgr: np.ndarray) -> list[Paragraph]:
    """The paragraphs with each of their boxes' ends at its ink (``to_ink``)."""
    return [
        dataclasses.replace(p, boxes=tuple(to_ink(box, bgr) for box in p.boxes)) for p in paragraphs
    ]
