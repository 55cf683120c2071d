"""The boxes that layout works on: a recognised line (``TextBox``) and a stack of lines
(``TextBlock``). Pure data, no I/O."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median


@dataclass(frozen=True, slots=True)
class TextBox:
    """One recognised text region in upright page pixels.

    ``x0..y1`` bound it; ``height`` is the text height, measured along the box's own sides
    so that a skewed line does not look taller than it is.
    """

    x0: float
    y0: float
    x1: float
    y1: float
    text: str
    score: float = 1.0
    height: float = 0.0
    #: Slope of the line's top edge in radians (positive: falling to the right).
    angle: float = 0.0
    #: "line", or "table" for a whole table whose ``text`` is Markdown.
    kind: str = "line"
    #: The detected boxes this one stands for, as the detector gave them (a deskewed
    #: line, a number cut out of a line, a table's cells); empty: the box itself.
    members: tuple[TextBox, ...] = ()

    @property
    def detected(self) -> tuple[TextBox, ...]:
        """The detected boxes this one stands for (``members``, or itself)."""
        return self.members or (self,)

    @classmethod
    def from_quad(cls, points: Sequence[Sequence[float]], text: str, score: float = 1.0) -> TextBox:
        """A box from four corners (x, y) in clockwise order starting at the top left."""
        (ax, ay), (bx, by), (cx, cy), (dx, dy) = (tuple(map(float, p)) for p in points)
        xs, ys = (ax, bx, cx, dx), (ay, by, cy, dy)
        side = max(math.hypot(ax - dx, ay - dy), math.hypot(bx - cx, by - cy))
        angle = math.atan2(by - ay, bx - ax) if bx != ax or by != ay else 0.0
        return cls(min(xs), min(ys), max(xs), max(ys), text, float(score), side, angle)

    @property
    def cy(self) -> float:
        """Vertical centre."""
        return (self.y0 + self.y1) / 2

    @property
    def text_height(self) -> float:
        """``height`` when known, else the bounding-box height."""
        return self.height or (self.y1 - self.y0)


@dataclass(frozen=True, slots=True)
class TextBlock:
    """Lines (boxes) stacked into one block, top to bottom."""

    lines: tuple[TextBox, ...]
    x0: float
    y0: float
    x1: float
    y1: float
    height: float

    @classmethod
    def of(cls, lines: Sequence[TextBox]) -> TextBlock:
        """The block made of ``lines`` (kept in the given order)."""
        return cls(
            tuple(lines),
            min(line.x0 for line in lines),
            min(line.y0 for line in lines),
            max(line.x1 for line in lines),
            max(line.y1 for line in lines),
            median(line.text_height for line in lines),
        )

    @property
    def cy(self) -> float:
        """Vertical centre."""
        return (self.y0 + self.y1) / 2


def starts_mid_sentence(text: str) -> bool:
    """Whether a line's ``text`` goes on with a sentence begun above it: its first letter is
    lower case (scripts without case never do)."""
    stripped = text.lstrip()
    return bool(stripped) and stripped[0].islower()
