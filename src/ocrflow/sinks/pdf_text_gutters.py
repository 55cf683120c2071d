"""Columns kept apart in the text layer: blocks side by side drawn far enough apart, and
blocks one over the other set at sizes apart where joining them would take in a third,
so that text extractors read the page's blocks as the Markdown does.

poppler's ``pdftotext`` builds its blocks from the layer's words. It grows a block from
one word down and up the page through lines of the same size (within 5 %) that overlap it
across, baselines less than 1.5 sizes apart; and it takes in every word on the block's
lines (baselines up to half a size beyond them) that overlaps the block across or comes
within 0.7 sizes of its side (``-colspacing``; 1.0 size when three lines or fewer have
one there). The layer's type is set from the line spacing (``pdf_text_sizes.py``: 15 pt
for 10-pt print on 12-pt leading), which went wrong twice:

- **A narrow gutter.** Two columns a 10-pt gutter apart (LaTeX's default) were read
  across, line by line (CER 0.67). Smaller type for such columns does not do: a block's
  lines must share one size, and sizes cut down to the narrowest gap on a page ran a
  skewed page's columns together. So where two blocks overlap down the page and stand
  less than ``GUTTER_ROOM`` sizes apart, the lines that face each other across the gap
  are narrowed, each side by half of what is missing, and their words squeezed along
  them: a search highlight then stops a character short of the gutter at most. A line is
  never narrowed by more than ``MOST_NARROWED`` of its width (a one-word label beside its
  text keeps its box). The blocks are gathered first as poppler gathers them (a column's
  paragraphs are one of its blocks, as wide as their widest line).
- **A block under a column and what stands beside it.** A paragraph across the page
  under the body of a Wikipedia printout, less than 1.5 sizes below it, made one block
  with it, as wide as the page, and the infobox beside the body was read into it line by
  line. Where joining two blocks one over the other would take in a third that neither
  takes in alone, the lower one is set ``SHRINK`` times smaller: poppler joins no sizes
  5 % apart, and its flows take a smaller block under a larger one. (A paragraph across
  two columns just over them is the same case turned over.)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ocrflow.sinks.pdf_text_sizes import LineSpan, lines_by_block

#: The least gap between blocks side by side, in font sizes (poppler: 1.0, and a margin).
GUTTER_ROOM = 1.1
#: poppler's lines of one block: sizes at most this much apart, and at most this many sizes
#: from one baseline to the next.
SAME_SIZE, LINE_GAP = 0.05, 1.5
#: A block kept from the one over it is set this many times its size (over 5 % apart
#: either way), never under ``LEAST_SIZE`` times its own.
SHRINK, LEAST_SIZE = 0.9, 0.5
#: The largest part of a line's width that narrowing may take.
MOST_NARROWED = 0.25
#: Pages of more blocks than this are drawn as they are: the blocks are compared pairwise
#: (0.3 s for 1,000 blocks, 5 ms for 100).
MOST_BLOCKS = 1000


@dataclass(frozen=True, slots=True)
class _Extents:
    """Boxes of blocks (or stacks of them), one array item each: their sides across, the
    middles of their top and bottom lines (fractions of the frame), their largest size
    (points)."""

    x0: np.ndarray
    x1: np.ndarray
    first: np.ndarray
    last: np.ndarray
    size: np.ndarray

    @classmethod
    def of(
        cls, groups: list[list[int]], spans: dict[int, LineSpan], sizes: dict[int, float]
    ) -> _Extents:
        rows = [
            (
                min(spans[line].x0 for line in lines),
                max(spans[line].x1 for line in lines),
                min(spans[line].middle for line in lines),
                max(spans[line].middle for line in lines),
                max(sizes.get(line, 0.0) for line in lines),
            )
            for lines in groups
        ]
        x0, x1, first, last, size = np.array(rows, dtype=np.float64).reshape(-1, 5).T
        return cls(x0, x1, first, last, size)

    def item(self, i: int) -> tuple[float, float, float, float, float]:
        return (
            float(self.x0[i]),
            float(self.x1[i]),
            float(self.first[i]),
            float(self.last[i]),
            float(self.size[i]),
        )

    def beside_pairs(self, slack: np.ndarray) -> np.ndarray:
        """[i, j]: whether i and j overlap down the page, give or take ``slack[i, j]``."""
        return (self.first[:, None] - slack <= self.last[None, :]) & (
            self.first[None, :] - slack <= self.last[:, None]
        )

    def over(self, box: tuple[float, float, float, float, float], slack: float) -> np.ndarray:
        """Whether each item overlaps ``box`` across, and down the page give or take
        ``slack``."""
        x0, x1, first, last, _ = box
        return (
            (self.x0 < x1)
            & (x0 < self.x1)
            & (self.first - slack <= last)
            & (first - slack <= self.last)
        )


def _joined(
    one: tuple[float, float, float, float, float], other: tuple[float, float, float, float, float]
) -> tuple[float, float, float, float, float]:
    return (
        min(one[0], other[0]),
        max(one[1], other[1]),
        min(one[2], other[2]),
        max(one[3], other[3]),
        max(one[4], other[4]),
    )


def kept_apart(
    spans: dict[int, LineSpan], sizes: dict[int, float], width: float, height: float
) -> tuple[dict[int, float], dict[int, tuple[float, float]]]:
    """The layer's font sizes (points) and the lines to draw narrower than their boxes, as
    ``line: (x0, x1)`` (module docstring). ``spans``: the lines (fractions of the reading
    frame), ``sizes``: theirs as ``pdf_text_sizes.line_sizes`` gives them, ``width`` and
    ``height``: the frame's, in points."""
    blocks = lines_by_block(spans)
    if not blocks or len(blocks) > MOST_BLOCKS:
        return sizes, {}
    sizes, stacks = _unjoined(blocks, spans, sizes, height)
    if stacks is None:  # sizes changed: poppler's blocks are gathered anew at the new ones
        stacks = _Stacks(_Extents.of(blocks, spans, sizes), height)
        for a, b in stacks.joinable():
            stacks.join(a, b)
    gathered: dict[int, list[int]] = {}
    for block, label in enumerate(stacks.label.tolist()):
        gathered.setdefault(label, []).extend(blocks[block])
    return sizes, _narrowed(list(gathered.values()), spans, sizes, width, height)


def _unjoined(
    blocks: list[list[int]], spans: dict[int, LineSpan], sizes: dict[int, float], height: float
) -> tuple[dict[int, float], _Stacks | None]:
    """``sizes`` with each block that poppler would join to the one over it, and so take in
    a third block beside them, set ``SHRINK`` times that one's size; and the blocks gathered
    as poppler gathers them, when no size changed (None otherwise)."""
    extents = _Extents.of(blocks, spans, sizes)
    stacks = _Stacks(extents, height)
    size = extents.size.copy()
    for a, b in stacks.joinable():
        if stacks.label[a] == stacks.label[b]:
            continue
        if stacks.takes_in(a, b):
            size[b] = min(size[b], SHRINK * size[a])
        else:
            stacks.join(a, b)
    shrunk = [b for b in range(len(blocks)) if size[b] < extents.size[b]]
    if not shrunk:
        return sizes, stacks
    scaled = dict(sizes)
    for block in shrunk:
        scale = float(size[block] / extents.size[block])
        for line in blocks[block]:
            scaled[line] = max(sizes[line] * scale, LEAST_SIZE * sizes[line])
    return scaled, None


class _Stacks:
    """Blocks gathered as poppler gathers them into its blocks: each block's stack label,
    and each stack's box."""

    def __init__(self, extents: _Extents, height: float) -> None:
        self.blocks = extents
        self.height = height
        self.label = np.arange(len(extents.x0))
        self.box = {i: extents.item(i) for i in range(len(extents.x0))}

    def join(self, a: int, b: int) -> None:
        one, other = int(self.label[a]), int(self.label[b])
        if one != other:
            self.label[self.label == one] = other
            self.box[other] = _joined(self.box[other], self.box.pop(one))

    def joinable(self) -> list[tuple[int, int]]:
        """The pairs (upper, lower) of blocks that poppler joins: one size, overlapping
        across, their lines less than ``LINE_GAP`` sizes apart; from the top down."""
        e = self.blocks
        order = np.lexsort((np.arange(len(e.first)), e.first))
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        size = np.maximum(e.size[:, None], e.size[None, :])
        pairs = (
            (rank[:, None] < rank[None, :])
            & (np.abs(e.size[:, None] - e.size[None, :]) < SAME_SIZE * size)
            & (e.x0[:, None] < e.x1[None, :])
            & (e.x0[None, :] < e.x1[:, None])
            & e.beside_pairs(LINE_GAP * size / self.height)
        )
        upper, lower = np.nonzero(pairs)
        ranked = np.lexsort((rank[upper], rank[lower]))
        return list(zip(upper[ranked].tolist(), lower[ranked].tolist(), strict=True))

    def takes_in(self, a: int, b: int) -> bool:
        """Whether the stacks of ``a`` and ``b`` joined would lie over a block that neither
        lies over alone, across and down the page (give or take half a size)."""
        one, other = int(self.label[a]), int(self.label[b])
        upper, lower = self.box[one], self.box[other]
        joined = _joined(upper, lower)
        slack = joined[4] / 2 / self.height
        outside = (self.label != one) & (self.label != other)
        taken = self.blocks.over(joined, slack)
        alone = self.blocks.over(upper, slack) | self.blocks.over(lower, slack)
        return bool((outside & taken & ~alone).any())


def _narrowed(
    stacks: list[list[int]],
    spans: dict[int, LineSpan],
    sizes: dict[int, float],
    width: float,
    height: float,
) -> dict[int, tuple[float, float]]:
    """The lines of stacks side by side closer than ``GUTTER_ROOM`` sizes, narrowed."""
    e = _Extents.of(stacks, spans, sizes)
    size = np.maximum(e.size[:, None], e.size[None, :])
    room = GUTTER_ROOM * size
    close = (
        (e.x1[:, None] <= e.x0[None, :])
        & ((e.x0[None, :] - e.x1[:, None]) * width < room)
        & e.beside_pairs(size / 2 / height)
    )
    right: dict[int, float] = {}  # the least x1 a line may keep
    left: dict[int, float] = {}  # the least x0
    for a, b in zip(*np.nonzero(close), strict=True):
        middle = float(e.x1[a] + e.x0[b]) / 2
        half = float(room[a, b]) / 2 / width
        for line in stacks[a]:
            right[line] = min(right.get(line, 1.0), middle - half)
        for line in stacks[b]:
            left[line] = max(left.get(line, 0.0), middle + half)
    narrowed = {}
    for line in right.keys() | left.keys():
        span = spans[line]
        x0, x1 = max(span.x0, left.get(line, 0.0)), min(span.x1, right.get(line, 1.0))
        if (x0, x1) != (span.x0, span.x1) and x1 - x0 >= (1 - MOST_NARROWED) * (span.x1 - span.x0):
            narrowed[line] = (x0, x1)
    return narrowed
