"""Geometry shared by layout recipes: model grids, Qwen-style resizing, figure placeholders."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ocrflow.document import blocks_from_markdown
from ocrflow.errors import ConfigError
from ocrflow.recipes.base import Figure
from ocrflow.types import Block, BlockLabel, EngineReply, union_box, unit_box

Box = tuple[float, float, float, float]

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")

#: Pixel limits of the Qwen2/2.5-VL image processor (``min_pixels``/``max_pixels``).
QWEN_MIN_PIXELS = 56 * 56
QWEN_MAX_PIXELS = 28 * 28 * 16384


def figure_placeholder(index: int) -> str:
    """The marker left in the Markdown where figure ``index`` of the page goes."""
    return f"<!--figure:{index}-->"


@dataclass(slots=True)
class FigureSet:
    """The figures of one page as a parser finds them (one per ``parse`` call)."""

    figures: list[Figure] = field(default_factory=list)
    alts: list[str] = field(default_factory=list)

    def add(self, box: Box, label: str, alt: str = "") -> str:
        """Record a figure; returns the placeholder to put in the Markdown."""
        placeholder = figure_placeholder(len(self.figures))
        self.figures.append(Figure(box, label, placeholder))
        self.alts.append(alt.strip())
        return placeholder

    def attributes(self) -> dict[str, Any]:
        """``{"figure_alts": [...]}`` (one per figure) when the model described any."""
        return {"figure_alts": list(self.alts)} if any(self.alts) else {}


def parse_box(text: str) -> tuple[float, ...]:
    """The numbers of a box written as ``[x0, y0, x1, y1]``, ``x0 y0 x1 y1`` or similar."""
    return tuple(float(n) for n in _NUMBER.findall(text))


def scale_box(box: Sequence[float], width: float, height: float) -> Box:
    """``(x0, y0, x1, y1)`` on a ``width`` x ``height`` grid as fractions 0..1, ordered."""
    if len(box) != 4 or width <= 0 or height <= 0:
        raise ValueError(f"not a box on a {width}x{height} grid: {list(box)}")
    x0, x1 = sorted((_unit(box[0] / width), _unit(box[2] / width)))
    y0, y1 = sorted((_unit(box[1] / height), _unit(box[3] / height)))
    return (x0, y0, x1, y1)


def _unit(value: float) -> float:
    """``value`` clamped to 0..1 and rounded to 6 places."""
    return round(min(1.0, max(0.0, value)), 6)


def is_area(box: Box) -> bool:
    """Whether a scaled box covers some area (a crop of it is not empty)."""
    return box[2] > box[0] and box[3] > box[1]


def smart_resize(
    width: int,
    height: int,
    *,
    factor: int = 28,
    min_pixels: int = QWEN_MIN_PIXELS,
    max_pixels: int = QWEN_MAX_PIXELS,
) -> tuple[int, int]:
    """The ``(width, height)`` a Qwen2-VL-style processor resizes an image to.

    Models built on it (olmOCR-2, dots.ocr) answer in pixels of this resized image.
    """
    w = max(factor, round(width / factor) * factor)
    h = max(factor, round(height / factor) * factor)
    if w * h > max_pixels:
        beta = math.sqrt(width * height / max_pixels)
        w = max(factor, math.floor(width / beta / factor) * factor)
        h = max(factor, math.floor(height / beta / factor) * factor)
    elif w * h < min_pixels:
        beta = math.sqrt(min_pixels / (width * height))
        w = math.ceil(width * beta / factor) * factor
        h = math.ceil(height * beta / factor) * factor
    return w, h


def grounded_block(
    label: BlockLabel, text: str, boxes: Sequence[Box], source_label: str = ""
) -> Block | None:
    """A block of a grounded reply: its text (Markdown), the union of its boxes (scaled
    to 0..1; none: no box) and the model's own label; ``None`` for a block without text,
    unless it is a figure or page furniture (a figure's text is its placeholders)."""
    text = text.strip()
    if not text and label not in _KEPT_EMPTY:
        return None
    areas = [unit_box(box, 1.0, 1.0) for box in boxes if is_area(box)]
    source = source_label if source_label and source_label != label else None
    return Block(label, text, union_box(areas), source_label=source)


_KEPT_EMPTY = frozenset((BlockLabel.FIGURE, BlockLabel.PAGE_HEADER, BlockLabel.PAGE_FOOTER))


def markdown_blocks(markdown: str, figures: Sequence[Figure] = ()) -> tuple[Block, ...]:
    """Blocks of a Markdown-only reply (``document.blocks_from_markdown``); a figure block
    holding a figure's placeholder gets the figure's box."""
    blocks = blocks_from_markdown(markdown)
    if not figures:
        return blocks
    boxes = {figure.placeholder: figure.bbox for figure in figures if figure.placeholder}
    return tuple(_with_figure_box(block, boxes) for block in blocks)


def _with_figure_box(block: Block, boxes: dict[str, Box]) -> Block:
    if block.label is not BlockLabel.FIGURE:
        return block
    found = [box for placeholder, box in boxes.items() if placeholder in block.text]
    if not found:
        return block
    return Block(block.label, block.text, union_box(unit_box(b, 1.0, 1.0) for b in found))


def reply_image_size(reply: EngineReply) -> tuple[int, int] | None:
    """The size of the image sent, as the reader records it in ``reply.image_size``
    (pixels of the image actually sent, after any shrink or rotation); else None."""
    size = reply.image_size
    if size is None:
        return None
    if size.width <= 0 or size.height <= 0:
        raise ConfigError(f"bad image size in the reply: {size.width} x {size.height}")
    return size.width, size.height


def require_image_size(reply: EngineReply, recipe: str) -> tuple[int, int]:
    """``reply_image_size`` for recipes that cannot place figures without it."""
    size = reply_image_size(reply)
    if size is None:
        raise ConfigError(f"the {recipe} recipe needs the image size in EngineReply.image_size")
    return size
