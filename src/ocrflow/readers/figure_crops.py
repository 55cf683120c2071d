"""Figure crops of an accepted read: the page's figures cut as PNGs, one placeholder each."""

from __future__ import annotations

import dataclasses
import io

from PIL import Image

from ocrflow.recipes.base import ParsedPage
from ocrflow.render.jobs import decode_image
from ocrflow.types import Block, BlockLabel, Figure, PageImage, unit_box


def crop_figures(
    page: int, parsed: ParsedPage, image: PageImage
) -> tuple[str, tuple[Figure, ...], tuple[Block, ...]]:
    """The page's Markdown with one placeholder per figure, the figures as PNG crops, and
    the page's blocks with the same placeholders.

    A recipe's own placeholder becomes ``Figure.placeholder``; a figure without one is
    appended at the end (and to the blocks, as a figure block), so every figure has
    exactly one placeholder in the text.
    """
    markdown, blocks = parsed.markdown, parsed.blocks
    if not parsed.figures:
        return markdown, (), blocks
    picture = decode_image(image)
    figures = []
    for index, region in enumerate(parsed.figures):
        x0, y0, x1, y1 = (max(0.0, min(1.0, v)) for v in region.bbox)
        figure = Figure(
            page, index, region.label, (x0, y0, x1, y1), _crop_png(picture, region.bbox)
        )
        if region.placeholder and region.placeholder in markdown:
            markdown = markdown.replace(region.placeholder, figure.placeholder)
            blocks = _renamed(blocks, region.placeholder, figure.placeholder)
        else:
            markdown = f"{markdown}\n\n{figure.placeholder}"
            alone = Block(BlockLabel.FIGURE, figure.placeholder, unit_box(figure.box, 1.0, 1.0))
            blocks = (*blocks, alone) if blocks else ()
        figures.append(figure)
    return markdown, tuple(figures), blocks


def _renamed(blocks: tuple[Block, ...], old: str, new: str) -> tuple[Block, ...]:
    if old == new:
        return blocks
    return tuple(
        dataclasses.replace(b, text=b.text.replace(old, new)) if old in b.text else b
        for b in blocks
    )


def _crop_png(picture: Image.Image, bbox: tuple[float, float, float, float]) -> bytes:
    x0, y0, x1, y1 = (max(0.0, min(1.0, v)) for v in bbox)
    box = (
        int(x0 * picture.width),
        int(y0 * picture.height),
        max(int(x1 * picture.width), int(x0 * picture.width) + 1),
        max(int(y1 * picture.height), int(y0 * picture.height) + 1),
    )
    buffer = io.BytesIO()
    picture.crop(box).save(buffer, format="PNG")
    return buffer.getvalue()
