"""``--deskew``'s two halves agree: the matrix that turns the page's content and the move
of the boxes where our level text goes put a point at the same place."""

from __future__ import annotations

import math

import pytest

from ocrflow.sinks.pdf_deskew import BoxTurn, turn_about

WIDTH, HEIGHT = 612.0, 792.0


@pytest.mark.parametrize("degrees", [1.9, -3.0, 7.5])
@pytest.mark.parametrize("point", [(0.1, 0.2), (0.8, 0.9), (0.5, 0.5), (0.3, 0.7)])
def test_the_boxes_move_as_the_content_turns(degrees: float, point: tuple[float, float]) -> None:
    angle = math.radians(degrees)
    a, b, c, d, e, f = turn_about(angle, (WIDTH / 2, HEIGHT / 2))
    # The point in PDF space (points, y up), moved by the content's matrix ...
    x, y = point[0] * WIDTH, (1 - point[1]) * HEIGHT
    moved = ((a * x + c * y + e) / WIDTH, 1 - (b * x + d * y + f) / HEIGHT)
    # ... lands where the box centred on it goes.
    box = BoxTurn(angle, WIDTH, HEIGHT).box(
        (point[0] - 0.01, point[1] - 0.01, point[0] + 0.01, point[1] + 0.01)
    )
    assert box is not None
    centre = ((box[0] + box[2]) / 2, (box[1] + box[3]) / 2)
    assert centre == pytest.approx(moved, abs=1e-9)


def test_a_line_running_down_to_the_right_comes_out_level() -> None:
    angle = math.radians(2.0)
    a, b, c, d, _, _ = turn_about(angle, (0.0, 0.0))
    # In PDF space (y up) such a line runs at minus the angle.
    dx, dy = math.cos(-angle), math.sin(-angle)
    assert b * dx + d * dy == pytest.approx(0.0, abs=1e-12)
    assert a * dx + c * dy > 0
