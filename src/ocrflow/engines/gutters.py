"""Detected lines that run across a column gutter, cut in two where the gutter is.

The detector finds lines on a page shrunk to the size its text asks for (``detsize.py``);
there, a gutter as narrow as LaTeX's two-column default (10 pt for 10-pt type) is about as
wide as the gap the detector bridges between words, and now and then it returns one box for
two lines side by side, one in each column (on a 300-dpi page of such columns: the first
line, and a line or two where both columns' lines run up to the gutter). Read as one line,
it reads across the gutter, and the reading order then takes it for a line across the
page: the columns above it are read side by side, band by band (CER 0.25 on that page,
against 0.000 once the lines are cut).

A line is cut only where three things agree, in median line heights ``h``:

- **Its neighbours leave a gutter.** The lines whose middles lie within ``REACH`` h above
  or below it, overlap it across and are ``MIN_NEIGHBOUR`` h long at least (a page number
  under the gutter stands in it), leave an empty strip at least ``MIN_GUTTER`` h wide
  inside it, at least ``END_ROOM`` h from its ends, with at least ``MIN_SIDE`` of them on
  each side of the strip. Neighbours nearly as long as the line (``ALONG``) are left out:
  two merged lines, one over the other, would each hide the other's gutter; where three
  or more are (the top lines of the columns), each pass's pieces are the next pass's
  neighbours (``PASSES``). ``MIN_GUTTER`` is a quarter of a line: the neighbours' boxes
  are padded by about that much at each end.
- **Its own ink has a gap there** of at least ``MIN_GAP`` h: wider than a justified word
  space, so a line across the page whose neighbours happen to be columns (a title over
  them) is left whole.
- **It is a body line**: at least ``MIN_LINE`` h long, at most ``MAX_HEIGHT`` h tall.

The line is cut at its gap, which stays between the two pieces (the reading order looks
for the gutter among the boxes), each piece a quad of its own (corners interpolated along
its top and bottom edges), and both are read as lines.

The detector also runs a line's box on into the next column's first letter now and then
(or starts the next column's line in this one's last): two boxes on one row that overlap
across, or that its padding leaves less than ``MIN_GUTTER`` h apart. Nothing between them
is free, so the reading order read that row across (a 12-pt gutter: CER 0.020, and
``pdftotext`` of the searchable PDF 0.71; an 8-pt one: 0.369). Such a pair is cut back
to the widest gap in their ink between them when it is a gutter's (``MIN_GAP`` h or
more), and most of the gap stays free.

Pure functions over the quads and the page's pixels, no I/O.
"""

from __future__ import annotations

from statistics import median

import numpy as np

from ocrflow.engines.bands import free_spans
from ocrflow.engines.geometry import Quads
from ocrflow.engines.ink import inked_columns

#: Thresholds in median line heights (module docstring).
MIN_GUTTER = 0.25
MIN_GAP = 0.6
REACH = 4.0
END_ROOM = 2.0
MIN_LINE = 6.0
MAX_HEIGHT = 1.6
MIN_SIDE = 2
#: Neighbours shorter than this (a page number under the gutter) are left out.
MIN_NEIGHBOUR = 2.0
#: Passes at most: lines cut in one pass show the gutter to the lines they hid it from
#: (a scanned paper whose columns' last 14 lines were all joined took 4).
PASSES = 10
#: Lines on one row: middles at most ``ROW`` lines apart; a line runs into the next by at
#: most ``MAX_OVERRUN`` lines.
ROW, MAX_OVERRUN = 0.5, 3.0
#: Neighbours at least this share of the line's length are left out of its gutter test.
ALONG = 0.75


def split_at_gutters(quads: Quads, bgr: np.ndarray) -> Quads:
    """``quads`` with each line that runs across a column gutter cut in two there, and lines
    side by side that run into each other cut back to the gap between them (module
    docstring); the others as they were, in their order."""
    if len(quads) < 2:
        return quads
    _, y0, _, y1 = _bounds(quads)
    line = float(median((y1 - y0).tolist()))
    if line <= 0:
        return quads
    quads = _cut_overruns(quads, line, bgr)
    # Where several lines at the top of the columns are joined, each hides the gutter from
    # the others: the pieces of one pass are the next pass's neighbours.
    for _ in range(PASSES):
        cut = _cut_gutters(quads, line, bgr)
        if cut is quads:
            break
        quads = cut
    return quads


def _cut_gutters(quads: Quads, line: float, bgr: np.ndarray) -> Quads:
    """``quads`` with each line that runs across a gutter cut in two (``quads`` itself when
    none does)."""
    if len(quads) <= 2 * MIN_SIDE:
        return quads
    x0, y0, x1, y1 = _bounds(quads)
    pieces: list[np.ndarray] = []
    for i, quad in enumerate(quads):
        gap = _gutter_cut(i, (x0, y0, x1, y1), line, bgr)
        pieces.extend([quad] if gap is None else _cut_quad(quad, *gap))
    if len(pieces) == len(quads):
        return quads
    return np.stack(pieces).astype(quads.dtype)


def _bounds(quads: Quads) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each quad's upright bounds: x0, y0, x1, y1."""
    xs, ys = quads[:, :, 0], quads[:, :, 1]
    return xs.min(axis=1), ys.min(axis=1), xs.max(axis=1), ys.max(axis=1)


def _cut_overruns(quads: Quads, line: float, bgr: np.ndarray) -> Quads:
    """``quads`` with each pair of lines side by side on one row whose boxes overlap (the
    first running on into the second's first letter, or the second starting in the first's
    last) or leave less than ``MIN_GUTTER`` between them cut back to the widest gap in
    their ink between them, when it is a gutter's (``MIN_GAP`` lines or more): each keeps a
    quarter of the gap at most, the rest of it stays free."""
    x0, y0, x1, y1 = _bounds(quads)
    middles = (y0 + y1) / 2
    pairs = (
        (np.abs(middles[:, None] - middles[None, :]) <= ROW * line)
        & (x0[:, None] < x0[None, :])
        & (x0[None, :] < x1[:, None] + MIN_GUTTER * line)
        & (x1[:, None] < x1[None, :])
        & (x1[:, None] - x0[None, :] <= MAX_OVERRUN * line)
    )
    cut = quads.astype(np.float64)
    changed = False
    for i, j in zip(*np.nonzero(pairs), strict=True):
        box = (x0[i], max(y0[i], y0[j]), x1[j], min(y1[i], y1[j]))
        gap = _ink_gap(bgr, box, x0[j] - line / 2, x1[i] + line / 2, line)
        if gap is None:
            continue
        keep = min((gap[1] - gap[0]) / 4, line / 4)
        end, start = gap[0] + keep, gap[1] - keep
        if x1[i] > end:
            cut[i] = _cut_quad(cut[i], end, x1[i])[0]
        if x0[j] < start:
            cut[j] = _cut_quad(cut[j], x0[j], start)[1]
        changed = True
    return cut.astype(quads.dtype) if changed else quads


def _gutter_cut(
    i: int,
    bounds: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    line: float,
    bgr: np.ndarray,
) -> tuple[float, float] | None:
    """The gap line ``i`` is cut at (x from, x to, in pixels), or None."""
    x0, y0, x1, y1 = bounds
    if x1[i] - x0[i] < MIN_LINE * line or y1[i] - y0[i] > MAX_HEIGHT * line:
        return None
    middles, widths = (y0 + y1) / 2, x1 - x0
    near = (np.abs(middles - middles[i]) <= REACH * line) & (x0 < x1[i]) & (x1 > x0[i])
    # Lines about as long as this one are no column's: two such lines, one over the other,
    # would each hide the other's gutter. Their ink speaks for them (``_ink_gap``).
    near &= widths < ALONG * widths[i]
    # A page number centred under the gutter would stand in it: only words count.
    near &= widths >= MIN_NEIGHBOUR * line
    near[i] = False
    if near.sum() < 2 * MIN_SIDE:
        return None
    inside = (x0[i] + END_ROOM * line, x1[i] - END_ROOM * line)
    spans = zip(x0[near].tolist(), x1[near].tolist(), strict=True)
    for left, right in free_spans(spans, *inside, MIN_GUTTER * line):
        sides = (int((x1[near] <= left).sum()), int((x0[near] >= right).sum()))
        if min(sides) < MIN_SIDE:
            continue
        gap = _ink_gap(bgr, (x0[i], y0[i], x1[i], y1[i]), left, right, line)
        if gap is not None:
            return gap
    return None


def _ink_gap(
    bgr: np.ndarray,
    box: tuple[float, float, float, float],
    left: float,
    right: float,
    line: float,
) -> tuple[float, float] | None:
    """The widest inkless run of columns of the line's box that lies in [``left``,
    ``right``] (widened by half a line each way, the neighbours' boxes being padded), when
    it is at least ``MIN_GAP`` lines wide: (its first column, the one after its last)."""
    found = inked_columns(bgr, box)
    if found is None:
        return None
    start, inked = found
    low = max(round(left - line / 2) - start, 0)
    high = min(round(right + line / 2) - start, len(inked))
    best, best_at, run = 0, 0, 0
    for x in range(low, high):
        run = 0 if inked[x] else run + 1
        if run > best:
            best, best_at = run, x
    if best < MIN_GAP * line:
        return None
    return float(start + best_at + 1 - best), float(start + best_at + 1)


def _cut_quad(quad: np.ndarray, left: float, right: float) -> list[np.ndarray]:
    """``quad`` (top-left, top-right, bottom-right, bottom-left) without the strip from
    ``left`` to ``right``: the piece before it and the piece after it. The gap stays a gap
    between the two boxes, so that the reading order finds the gutter there too."""
    tl, tr, br, bl = (quad[k].astype(np.float64) for k in range(4))

    def at(x: float) -> tuple[np.ndarray, np.ndarray]:
        return tl + (tr - tl) * _along(tl[0], tr[0], x), bl + (br - bl) * _along(bl[0], br[0], x)

    (top_a, bottom_a), (top_b, bottom_b) = at(left), at(right)
    return [np.stack([tl, top_a, bottom_a, bl]), np.stack([top_b, tr, br, bottom_b])]


def _along(start: float, end: float, x: float) -> float:
    """Where ``x`` lies from ``start`` to ``end``, 0..1."""
    return 0.5 if end == start else min(max((x - start) / (end - start), 0.0), 1.0)
