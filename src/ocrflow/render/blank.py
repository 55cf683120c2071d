"""Blank-page test for rendered pages: no engine call for white paper, speckle or shadows.

The page is shrunk to about 320 px (a box filter: speckle averages away, strokes of text
stay as grey cells), the paper colour is estimated block by block (so yellowed paper, a
gutter shadow or a grey scan all count as background), and what is darker than its local
paper by more than the noise allows is ink. Ink in straight bands that run along most of a
row or column (page borders, scanner edges, a fold) and ink in the outer margin are not
content; isolated ink cells are dust. A page is blank when too little ink remains.
"""

from __future__ import annotations

import numpy as np
from PIL import Image

#: Longest side, in pixels, of the shrunken page the test looks at.
WORK_SIZE = 320
#: Side of the square blocks whose bright level estimates the local paper colour.
BLOCK = 16
#: Darker than the local paper by at least this much (0-255) is ink: a stroke of text
#: covering a quarter of a shrunken cell darkens it by about 50 on white paper.
MIN_CONTRAST = 28
#: Ink must also stand this many noise deviations above the paper.
NOISE_SIGMAS = 5.0
#: A row or column inked over this share of its length is a border, rule or edge shadow.
LINE_SHARE = 0.5
#: Outer margin ignored on each side, as a share of the side: scanner edges and punch holes.
MARGIN = 0.03
#: Ink cells within ``DENSE_RADIUS`` cells of a cell for it to count as content.
DENSE_RADIUS = 2
DENSE_CELLS = 6
#: Ink cells (in dense neighbourhoods) a page needs to hold content: three short words at
#: 10 pt on a 1288 px page make about 60; a page number alone about 8.
MIN_INK_CELLS = 16


def is_blank_image(image: Image.Image) -> bool:
    """Whether a rendered page shows nothing worth reading (paper, noise, borders)."""
    gray = _shrink(image)
    ink = _ink_mask(gray)
    ink = _drop_lines(ink)
    ink = _crop_margin(ink)
    return _count_clustered(ink) < MIN_INK_CELLS


def _shrink(image: Image.Image) -> np.ndarray:
    """The page at about ``WORK_SIZE`` px, as darkest-channel values (catches coloured ink)."""
    if image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info:
        image = _on_white(image)
    elif image.mode not in ("L", "RGB"):
        image = image.convert("RGB")
    factor = max(1, round(max(image.size) / WORK_SIZE))
    pixels = np.asarray(image.reduce(factor) if factor > 1 else image)
    return pixels.min(axis=2) if pixels.ndim == 3 else pixels


def _on_white(image: Image.Image) -> Image.Image:
    """``image`` flattened onto white paper (transparent parts of a page are paper)."""
    rgba = image.convert("RGBA")
    paper = Image.new("RGB", rgba.size, (255, 255, 255))
    paper.paste(rgba, mask=rgba.getchannel("A"))
    return paper


def _ink_mask(gray: np.ndarray) -> np.ndarray:
    """Pixels darker than their local paper by more than contrast and noise allow."""
    paper = _paper_level(gray)
    darkness = paper - gray.astype(np.int16)
    noise = _noise_sigma(darkness)
    return darkness > max(MIN_CONTRAST, NOISE_SIGMAS * noise)


def _paper_level(gray: np.ndarray) -> np.ndarray:
    """Local paper brightness: the 90th percentile of each block, smoothly upsampled."""
    height, width = gray.shape
    side = max(1, min(BLOCK, height, width))  # a strip of a single text line is narrow
    rows, cols = height // side, width // side
    tiles = gray[: rows * side, : cols * side].reshape(rows, side, cols, side)
    blocks = tiles.transpose(0, 2, 1, 3).reshape(rows, cols, side * side)
    kth = int(0.9 * (side * side - 1))
    level = np.partition(blocks, kth, axis=2)[:, :, kth].astype(np.uint8)
    smooth = Image.fromarray(level).resize((width, height), Image.Resampling.BILINEAR)
    return np.asarray(smooth).astype(np.int16)


def _noise_sigma(darkness: np.ndarray) -> float:
    """Robust spread of the paper around its level (median absolute deviation)."""
    sample = darkness[::2, ::2]
    paper = sample[sample < MIN_CONTRAST]
    if paper.size == 0:
        return 0.0
    return float(1.4826 * np.median(np.abs(paper - np.median(paper))))


def _drop_lines(ink: np.ndarray) -> np.ndarray:
    """Clear rows and columns inked over most of their length (borders, rules, edges)."""
    rows = ink.mean(axis=1) > LINE_SHARE
    cols = ink.mean(axis=0) > LINE_SHARE
    if not rows.any() and not cols.any():
        return ink
    ink = ink.copy()
    ink[_widen(rows), :] = False
    ink[:, _widen(cols)] = False
    return ink


def _widen(lines: np.ndarray) -> np.ndarray:
    """A line flag spread to its neighbours: a shrunken rule smears over two cells."""
    widened = lines.copy()
    widened[1:] |= lines[:-1]
    widened[:-1] |= lines[1:]
    return widened


def _crop_margin(ink: np.ndarray) -> np.ndarray:
    height, width = ink.shape
    dy, dx = int(height * MARGIN), int(width * MARGIN)
    return ink[dy : height - dy, dx : width - dx]


def _count_clustered(ink: np.ndarray) -> int:
    """Ink cells in dense neighbourhoods: dust and speckle are small and scattered.

    A cell counts when its 5 x 5 neighbourhood holds at least ``DENSE_CELLS`` ink cells: a
    dust spot smears over at most four, a word fills a strip of dozens.
    """
    if not ink.any():
        return 0
    window = 2 * DENSE_RADIUS + 1
    padded = np.pad(ink.astype(np.int32), DENSE_RADIUS + 1)
    table = padded.cumsum(axis=0).cumsum(axis=1)
    height, width = ink.shape
    sums = (
        table[window : window + height, window : window + width]
        - table[:height, window : window + width]
        - table[window : window + height, :width]
        + table[:height, :width]
    )
    return int(np.count_nonzero(ink & (sums >= DENSE_CELLS)))
