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

import itertools
from dataclasses import dataclass

from ocrflow.sinks.pdf_text_sizes import LineSpan

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


@dataclass(frozen=True, slots=True)
class _Extent:
    x0: float
    x1: float
    first: float  # the middle of the top line
    last: float  # the middle of the bottom line
    size: float  # the largest font size, points

    def joined(self, other: _Extent) -> _Extent:
        return _Extent(
            min(self.x0, other.x0),
            max(self.x1, other.x1),
            min(self.first, other.first),
            max(self.last, other.last),
            max(self.size, other.size),
        )

    def across(self, other: _Extent) -> bool:
        """Whether the two overlap across the page."""
        return self.x0 < other.x1 and other.x0 < self.x1

    def beside(self, other: _Extent, slack: float) -> bool:
        """Whether the two overlap down the page, give or take ``slack``."""
        return self.first - slack <= other.last and other.first - slack <= self.last


def kept_apart(
    spans: dict[int, LineSpan], sizes: dict[int, float], width: float, height: float
) -> tuple[dict[int, float], dict[int, tuple[float, float]]]:
    """The layer's font sizes (points) and the lines to draw narrower than their boxes, as
    ``line: (x0, x1)`` (module docstring). ``spans``: the lines (fractions of the reading
    frame), ``sizes``: theirs as ``pdf_text_sizes.line_sizes`` gives them, ``width`` and
    ``height``: the frame's, in points."""
    blocks: dict[int, list[int]] = {}
    for line, span in spans.items():
        if span.block >= 0:
            blocks.setdefault(span.block, []).append(line)
    sizes = _unjoined(blocks, spans, sizes, height)
    extents = {block: _extent(lines, spans, sizes) for block, lines in blocks.items()}
    stacks = _Stacks(extents, height)
    for a, b in stacks.joinable():
        stacks.join(a, b)
    members: dict[int, list[int]] = {}
    for block, lines in blocks.items():
        members.setdefault(stacks.root(block), []).extend(lines)
    return sizes, _narrowed(members, spans, sizes, width, height)


def _unjoined(
    blocks: dict[int, list[int]], spans: dict[int, LineSpan], sizes: dict[int, float], height: float
) -> dict[int, float]:
    """``sizes`` with each block that poppler would join to the one over it, and so take in
    a third block beside them, set ``SHRINK`` times that one's size."""
    extents = {block: _extent(lines, spans, sizes) for block, lines in blocks.items()}
    stacks = _Stacks(extents, height)
    size = {block: extent.size for block, extent in extents.items()}
    for a, b in stacks.joinable():
        if stacks.root(a) == stacks.root(b):
            continue
        if stacks.takes_in(a, b):
            size[b] = min(size[b], SHRINK * size[a])
        else:
            stacks.join(a, b)
    scaled = dict(sizes)
    for block, lines in blocks.items():
        scale = size[block] / extents[block].size if extents[block].size > 0 else 1.0
        if scale < 1.0:
            for line in lines:
                scaled[line] = max(sizes[line] * scale, LEAST_SIZE * sizes[line])
    return scaled


class _Stacks:
    """Blocks gathered as poppler gathers them into its blocks (union-find over the blocks'
    extents, each stack's extent kept at its root)."""

    def __init__(self, extents: dict[int, _Extent], height: float) -> None:
        self.blocks = extents
        self.height = height
        self.parent = {block: block for block in extents}
        self.extent = dict(extents)

    def root(self, block: int) -> int:
        while self.parent[block] != block:
            self.parent[block] = self.parent[self.parent[block]]
            block = self.parent[block]
        return block

    def join(self, a: int, b: int) -> None:
        ra, rb = self.root(a), self.root(b)
        if ra != rb:
            self.parent[ra] = rb
            self.extent[rb] = self.extent[rb].joined(self.extent[ra])

    def joinable(self) -> list[tuple[int, int]]:
        """The pairs (upper, lower) of blocks that poppler joins: one size, overlapping
        across, their lines less than ``LINE_GAP`` sizes apart; from the top down."""
        pairs = []
        for a, b in itertools.permutations(self.blocks, 2):
            one, other = self.blocks[a], self.blocks[b]
            size = max(one.size, other.size)
            if (
                (one.first, a) < (other.first, b)
                and abs(one.size - other.size) < SAME_SIZE * size
                and one.across(other)
                and one.beside(other, LINE_GAP * size / self.height)
            ):
                pairs.append((a, b))
        return sorted(pairs, key=lambda pair: (self.blocks[pair[1]].first, pair))

    def takes_in(self, a: int, b: int) -> bool:
        """Whether the stacks of ``a`` and ``b`` joined would lie over a block that neither
        lies over alone, across and down the page (give or take half a size)."""
        ra, rb = self.root(a), self.root(b)
        upper, lower = self.extent[ra], self.extent[rb]
        joined = upper.joined(lower)
        slack = joined.size / 2 / self.height
        for block, extent in self.blocks.items():
            if self.root(block) in (ra, rb):
                continue
            if _over(joined, extent, slack) and not (
                _over(upper, extent, slack) or _over(lower, extent, slack)
            ):
                return True
        return False


def _over(stack: _Extent, block: _Extent, slack: float) -> bool:
    return stack.across(block) and stack.beside(block, slack)


def _narrowed(
    members: dict[int, list[int]],
    spans: dict[int, LineSpan],
    sizes: dict[int, float],
    width: float,
    height: float,
) -> dict[int, tuple[float, float]]:
    """The lines of stacks side by side closer than ``GUTTER_ROOM`` sizes, narrowed."""
    extents = {stack: _extent(lines, spans, sizes) for stack, lines in members.items()}
    right: dict[int, float] = {}  # the least x1 a line may keep
    left: dict[int, float] = {}  # the least x0
    for a, b in itertools.permutations(extents, 2):
        one, other = extents[a], extents[b]
        size = max(one.size, other.size)
        if one.x1 > other.x0 or not one.beside(other, size / 2 / height):
            continue
        missing = GUTTER_ROOM * size - (other.x0 - one.x1) * width
        if missing <= 0:
            continue
        middle, half = (one.x1 + other.x0) / 2, GUTTER_ROOM * size / 2 / width
        for line in members[a]:
            right[line] = min(right.get(line, 1.0), middle - half)
        for line in members[b]:
            left[line] = max(left.get(line, 0.0), middle + half)
    narrowed = {}
    for line in right.keys() | left.keys():
        span = spans[line]
        x0, x1 = max(span.x0, left.get(line, 0.0)), min(span.x1, right.get(line, 1.0))
        if (x0, x1) != (span.x0, span.x1) and x1 - x0 >= (1 - MOST_NARROWED) * (span.x1 - span.x0):
            narrowed[line] = (x0, x1)
    return narrowed


def _extent(lines: list[int], spans: dict[int, LineSpan], sizes: dict[int, float]) -> _Extent:
    return _Extent(
        min(spans[line].x0 for line in lines),
        max(spans[line].x1 for line in lines),
        min(spans[line].middle for line in lines),
        max(spans[line].middle for line in lines),
        max(sizes.get(line, 0.0) for line in lines),
    )
