"""Deskew of line boxes: the page's boxes turned by minus its skew. Pure functions."""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import median

from ocrflow.engines.boxes import TextBox

#: Skew below which the boxes are left as they are (0.2°).
_LEVEL = math.radians(0.2)


def page_skew(boxes: Sequence[TextBox]) -> float:
    """The page's skew, radians (positive: lines run down to the right): the median slope
    of its long lines (at least three times as long as high; short boxes' slopes are
    noise); 0.0 without any."""
    slopes = [b.angle for b in boxes if b.x1 - b.x0 >= 3 * b.text_height]
    return median(slopes) if slopes else 0.0


def deskew(boxes: Sequence[TextBox]) -> list[TextBox]:
    """The boxes turned about the origin by minus the page's skew (``page_skew``)."""
    skew = page_skew(boxes)
    if abs(skew) < _LEVEL:
        return list(boxes)
    return [_turned(box, skew) for box in boxes]


def _turned(box: TextBox, skew: float) -> TextBox:
    """``box`` turned by ``-skew``: its centre moved, its size its length and text height."""
    cos, sin = math.cos(skew), math.sin(skew)
    cx, cy = (box.x0 + box.x1) / 2, (box.y0 + box.y1) / 2
    height = box.text_height
    # The bounding box of a w x h rectangle turned by a is (w cos + h sin) wide.
    width = max(height, (box.x1 - box.x0 - height * abs(sin)) / cos)
    x, y = cx * cos + cy * sin, cy * cos - cx * sin
    return TextBox(
        x - width / 2,
        y - height / 2,
        x + width / 2,
        y + height / 2,
        box.text,
        box.score,
        height,
        box.angle - skew,
        box.kind,
        box.detected,
    )
