"""Horizontal rules of a page image: the strokes a ruled table draws between its rows.

The page is halved when large, thresholded (Otsu), and opened with a flat kernel
``KERNEL`` of the page width long: letters never ink that long a run, rules do. A rule
tilted with the scan steps down a pixel every so often; its steps touch corner to corner,
so one connected component is one rule (or a piece of one, where noise broke it: pieces
in line are joined). A component at least ``MIN_LENGTH`` of the page
wide and thin (``MAX_THICKNESS`` of its length: not a filled bar or a picture) is a rule,
given by its two ends, so that a row can be placed between two rules at any x however
the page is tilted. 10-20 ms a 300-dpi page.

``render/rulings.py`` only counts a page's rules (is it table-like?), from each row's
longest dark run on an 800 px copy; a tilted rule is a staircase of short runs there, and
the count says nothing of where the rules stand, which the ruled tables need.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: A rule is at least this share of the page width long ...
MIN_LENGTH = 0.15
#: ... and at most this share of its length thick.
MAX_THICKNESS = 0.03
#: The opening kernel's length, as a share of the page width.
KERNEL = 0.04
#: Pieces whose ends lie this share of the page height apart are one rule.
JOIN = 0.004
#: Pages wider than this are halved first (rules stay rules, at a quarter of the pixels).
WORK_WIDTH = 1600


@dataclass(frozen=True, slots=True)
class Rule:
    """A horizontal stroke from ``(x0, y0)`` to ``(x1, y1)``, in the image's pixels."""

    x0: float
    y0: float
    x1: float
    y1: float

    def y_at(self, x: float) -> float:
        """The rule's height at ``x`` (extended past its ends as a straight line)."""
        if self.x1 <= self.x0:
            return self.y0
        return self.y0 + (self.y1 - self.y0) * (x - self.x0) / (self.x1 - self.x0)


def horizontal_rules(bgr: np.ndarray) -> list[Rule]:
    """The horizontal rules of ``bgr`` (a BGR or grey page image), top to bottom."""
    import cv2  # installed with rapidocr, as the models are

    gray = bgr if bgr.ndim == 2 else cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY)
    height, width = gray.shape
    if height < 2 or width < 2:
        return []
    factor = 0.5 if width > WORK_WIDTH else 1.0
    if factor < 1.0:
        size = (max(1, round(width * factor)), max(1, round(height * factor)))
        gray = cv2.resize(gray, size, interpolation=cv2.INTER_AREA)
    _, ink = cv2.threshold(gray, 0, 255, cv2.THRESH_BINARY_INV + cv2.THRESH_OTSU)
    kernel = np.ones((1, max(3, round(KERNEL * gray.shape[1]))), np.uint8)
    strokes = cv2.morphologyEx(ink, cv2.MORPH_OPEN, kernel)
    count, labels, stats, _ = cv2.connectedComponentsWithStats(strokes, connectivity=8)
    rules = []
    for label in range(1, count):
        x, y, w, h = stats[label, :4]
        if h > max(3, MAX_THICKNESS * w):
            continue  # a bar, a picture, text underlined
        rows, columns = np.nonzero(labels[y : y + h, x : x + w] == label)
        end = max(1, w // 20)
        left, right = rows[columns < end], rows[columns >= w - end]
        y0 = y + float(left.mean() if left.size else rows.mean())
        y1 = y + float(right.mean() if right.size else rows.mean())
        rules.append(Rule(x / factor, y0 / factor, (x + w) / factor, y1 / factor))
    joined = _joined(sorted(rules, key=lambda rule: rule.x0), JOIN * height, MIN_LENGTH * width)
    return [rule for rule in joined if rule.x1 - rule.x0 >= MIN_LENGTH * width]


def _joined(pieces: list[Rule], tolerance: float, gap: float) -> list[Rule]:
    """Pieces of one rule (broken where noise or a faint scan thinned it) joined: a piece
    that starts at most ``gap`` past the end of a rule found left of it, within
    ``tolerance`` of its line, goes on that rule. Top to bottom."""
    rules: list[Rule] = []
    for piece in pieces:  # left to right
        for i, rule in enumerate(rules):
            if piece.x0 - rule.x1 <= gap and abs(rule.y_at(piece.x0) - piece.y0) <= tolerance:
                if piece.x1 > rule.x1:
                    rules[i] = Rule(rule.x0, rule.y0, piece.x1, piece.y1)
                break
        else:
            rules.append(piece)
    return sorted(rules, key=lambda rule: (rule.y0 + rule.y1) / 2)
