"""Geometry: model grids, Qwen-style resizing, image size from the pipeline, figures."""

from __future__ import annotations

import pytest

from ocrflow.errors import ConfigError
from ocrflow.recipes.layout import (
    FigureSet,
    figure_placeholder,
    parse_box,
    reply_image_size,
    require_image_size,
    scale_box,
    smart_resize,
)
from ocrflow.types import EngineReply, ImageSize

from .helpers import reply


@pytest.mark.parametrize(
    ("size", "expected"),
    [
        ((1288, 996), (1288, 1008)),
        ((1584, 2048), (1596, 2044)),
        ((10, 10), (56, 56)),
    ],
)
def test_smart_resize(size: tuple[int, int], expected: tuple[int, int]) -> None:
    assert smart_resize(*size) == expected


def test_smart_resize_caps_pixels() -> None:
    width, height = smart_resize(6000, 8000, max_pixels=11289600)
    assert width * height <= 11289600
    assert width % 28 == 0 and height % 28 == 0
    assert abs(width / height - 0.75) < 0.01


def test_scale_box_orders_and_clamps() -> None:
    assert scale_box((500, 800, 100, 1200), 1000, 1000) == (0.1, 0.8, 0.5, 1.0)
    with pytest.raises(ValueError):
        scale_box((1, 2, 3), 10, 10)


@pytest.mark.parametrize("text", ["[10, 20, 30, 40]", "10 20 30 40", "[[10,20,30,40]]"])
def test_parse_box(text: str) -> None:
    assert parse_box(text) == (10.0, 20.0, 30.0, 40.0)


def test_image_size_comes_from_the_typed_reply_field() -> None:
    assert reply_image_size(reply("x", image_width=640, image_height=480)) == (640, 480)
    assert reply_image_size(reply("x")) is None
    # An untyped size in the attributes is not read any more.
    assert reply_image_size(EngineReply("x", attributes={"image_width": 640})) is None
    with pytest.raises(ConfigError):
        reply_image_size(EngineReply("x", image_size=ImageSize(0, 480)))
    with pytest.raises(ConfigError, match="dots recipe needs the image size"):
        require_image_size(reply("x"), "dots")


def test_figure_set_numbers_placeholders_and_keeps_alts() -> None:
    figures = FigureSet()
    assert figures.add((0, 0, 1, 1), "image") == figure_placeholder(0) == "<!--figure:0-->"
    assert figures.attributes() == {}
    assert figures.add((0, 0, 0.5, 0.5), "image", " a chart ") == "<!--figure:1-->"
    assert figures.attributes() == {"figure_alts": ["", "a chart"]}
    assert [f.placeholder for f in figures.figures] == ["<!--figure:0-->", "<!--figure:1-->"]
