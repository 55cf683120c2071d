"""Inserts in a column's flow: captions, pull quotes and boxed text set aside.

A magazine column is often interrupted: a figure and its caption, a pull quote in larger
type, a boxed note. Read top to bottom, the insert lands in the middle of a sentence ("...
the council voted / *Photo: the harbour* / to close the pier"). Here, in blocks already in
reading order, an insert is a run of blocks lying between two blocks of one column,
``above`` and ``below``, such that

- ``above`` does not end its paragraph: its last line runs to the column's right edge (a
  paragraph's last line is short, and ``layout.group_blocks`` closes a block after one),
  so the text goes on in ``below``;
- ``below`` is not a new paragraph in the same column: its first line is not indented and
  its type is the column's size;
- each insert block is set off from the column: set in from its left edge (centred or
  indented), in smaller type, or a few lines right under a figure's gap (``FIGURE_GAP``)
  that do not go on mid-sentence. A heading is none of these: it starts at the column's
  edge, in type as large or larger, and begins what follows it. When ``below`` goes on
  mid-sentence (its first letter is lower case), whatever lies between the two halves is
  set aside, as it cannot be part of the sentence (a boxed note set flush, in the
  column's type).

The run is moved after ``below``, the paragraph it interrupted. An insert of at most
``CAPTION_LINES`` lines, in smaller type or under a wide gap (the figure it captions), is a
caption; any other is an insert read as text. Pure functions, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

from ocrflow.engines.boxes import TextBlock, starts_mid_sentence

#: Roles of a set-aside block (``layout.Paragraph.region``).
CAPTION, INSERT = "caption", "insert"

#: A caption has at most this many lines ...
CAPTION_LINES = 3
#: ... and either smaller type than the column's (by this ratio) or this many text
#: heights of empty space above it (the figure).
SMALLER = 0.9
FIGURE_GAP = 3.0
#: Type of the same size as the column's: within this ratio.
SAME_SIZE = 1.2
#: Blocks of one column share at least this share of the narrower one's width.
SAME_COLUMN = 0.8
#: An insert starts this many text heights in from the column's left edge.
INDENT = 1.0
#: At most this many blocks lie between a paragraph's halves when it goes on mid-sentence.
RESUMED_RUN = 2


def set_inserts_aside(blocks: Sequence[TextBlock]) -> list[tuple[TextBlock, str | None]]:
    """``blocks`` (in reading order) with each insert run moved after the block it
    interrupts, each paired with its role (``CAPTION``, ``INSERT``, or None)."""
    out: list[tuple[TextBlock, str | None]] = []
    i = 0
    while i < len(blocks):
        end = _insert_run(blocks, i)
        if end is None:
            out.append((blocks[i], None))
            i += 1
            continue
        above, below = blocks[i], blocks[end]
        out.append((above, None))
        out.append((below, None))
        out.extend((block, _role(block, above)) for block in blocks[i + 1 : end])
        i = end + 1
    return out


def _insert_run(blocks: Sequence[TextBlock], i: int) -> int | None:
    """Index of ``below`` when ``blocks[i + 1 : below]`` is an insert run after
    ``blocks[i]`` (module docstring), else None."""
    above = blocks[i]
    if len(above.lines) < 2 or not _runs_on(above):
        return None
    goes_on = [
        end
        for end in range(i + 1, min(len(blocks), i + 5))
        if _same_column(above, blocks[end]) and _continues(above, blocks[end])
    ]
    # The sentence goes on, in lower case, past a block or two set off a little: those
    # cannot be part of it (a boxed note in the column's type, nearly flush).
    resumed = next((end for end in goes_on if _starts_mid_sentence(blocks[end])), None)
    if resumed is not None and 1 <= resumed - i - 1 <= RESUMED_RUN:
        below = blocks[resumed]
        if all(_is_insert(block, above, below, True) for block in blocks[i + 1 : resumed]):
            return resumed
    for end in goes_on:
        if end == i + 1 and end + 1 < len(blocks) and _captions_figure(blocks[end], above):
            continue  # right under the figure: its caption, in the column's type
        run = blocks[i + 1 : end]
        if run and all(_is_insert(block, above, blocks[end], False) for block in run):
            return end
        return None
    return None


def _runs_on(block: TextBlock) -> bool:
    last = block.lines[-1]
    return block.x1 - last.x1 <= 2 * last.text_height and last.kind == "line"


def _same_column(a: TextBlock, b: TextBlock) -> bool:
    """Whether ``b``, under ``a``, is in ``a``'s column: they overlap across, and ``b`` is
    not much wider (a paragraph across the page under a table's narrow header cell is no
    half of it: the table and the heading between them were set aside after it)."""
    overlap = min(a.x1, b.x1) - max(a.x0, b.x0)
    narrower = min(a.x1 - a.x0, b.x1 - b.x0)
    return (
        b.y0 >= a.y1 - a.height
        and overlap >= SAME_COLUMN * narrower
        and SAME_COLUMN * (b.x1 - b.x0) <= a.x1 - a.x0
    )


def _continues(above: TextBlock, below: TextBlock) -> bool:
    first = below.lines[0]
    same_size = max(above.height, below.height) <= SAME_SIZE * min(above.height, below.height)
    return same_size and first.x0 - above.x0 <= INDENT * first.text_height


def _is_insert(block: TextBlock, above: TextBlock, below: TextBlock, resumed: bool) -> bool:
    """Whether ``block`` is set aside from the paragraph ``above`` / ``below``, which goes
    on mid-sentence in ``below`` when ``resumed``: then nothing between its halves is part
    of it (a boxed note in the column's type, set flush)."""
    left, right = min(above.x0, below.x0), max(above.x1, below.x1)
    inside = block.y0 >= above.y1 - above.height and block.y1 <= below.y0 + below.height
    overlaps = min(block.x1, right) - max(block.x0, left) > 0
    if not (inside and overlaps):
        return False
    if resumed:
        # Set off at all: a little indented, in other type or under a gap.
        inset = block.x0 - left > 0.5 * above.height
        other = max(block.height, above.height) > 1.1 * min(block.height, above.height)
        return inset or other or block.y0 - above.y1 > 1.5 * above.height
    # Set in from the column's left edge, or in smaller type: a heading is neither (it
    # starts at the edge, in type as large or larger), and it starts what follows. A few
    # lines of the column's type under a figure's gap are its caption.
    indented = block.x0 - left > INDENT * above.height
    smaller = block.height * SAME_SIZE < above.height
    return indented or smaller or _under_figure(block, above)


def _captions_figure(block: TextBlock, above: TextBlock) -> bool:
    """A caption under a figure, not the interrupted text going on after some other
    insert's gap: that starts mid-sentence."""
    return _under_figure(block, above) and not _starts_mid_sentence(block)


def _starts_mid_sentence(block: TextBlock) -> bool:
    return starts_mid_sentence(block.lines[0].text)


def _under_figure(block: TextBlock, above: TextBlock) -> bool:
    """A few lines, not in larger type, under a figure's gap after ``above``."""
    short = len(block.lines) <= CAPTION_LINES
    return short and block.height <= SAME_SIZE * above.height and _figure_gap(block, above)


def _figure_gap(block: TextBlock, above: TextBlock) -> bool:
    return block.y0 - above.y1 >= FIGURE_GAP * above.height


def _role(block: TextBlock, above: TextBlock) -> str:
    smaller = block.height < SMALLER * above.height
    short = len(block.lines) <= CAPTION_LINES
    return CAPTION if short and (smaller or _figure_gap(block, above)) else INSERT
