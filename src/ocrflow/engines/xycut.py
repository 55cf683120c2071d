"""Reading order of a page's regions: recursive XY-cut with column detection over line boxes.

1. **Page furniture.** A short band of lines at the very top (bottom) of the page, set
   apart from the body by a wider gap than paragraphs have, is the running header
   (footer): it is read first (last), never in the middle of a column. A one-line band
   with a page number in it ("— 170 —", "xiv", "Seite 3") needs next to no gap: running
   heads are often set closer to the body than paragraphs are apart. A band of many words
   (a paragraph's first lines over a figure) and, without a page number, a band over
   (under) less than a page of text (a poster's title and byline) are not furniture.
2. **Sections.** The rest is cut into horizontal bands (no line crosses a gap between
   bands). Neighbouring bands that share a gutter, an empty vertical strip with text on
   both sides, belong to the same multi-column section, unless a gap of ``max_join``
   text heights (a figure) parts them; a full-width title or paragraph shares no gutter
   and stands alone. A short band across the columns that go on under it (the same
   columns above and below, each column above ending in a full line, the band in other
   type or narrower, and set in from their left edge or with every column under it
   going on mid-sentence: a pull quote) does not cut them: the columns are read down
   past it, and it becomes an ``INSERT`` region after the first column, which the layout
   reads after the paragraph it interrupts (``layout._region_paragraphs``).
3. **Columns.** A section is cut at every vertical gap of ``gutter`` text heights that no
   line crosses, and each column is cut again from step 2 (nested columns, side boxes).

What cannot be cut is a leaf, read top to bottom by the caller; stacked leaves without
columns are joined back into one, so a column's paragraphs stay one region. Cutting only
where nothing crosses is what keeps a footer or a caption from landing mid-column: plain
XY-cut reads two columns across whenever their paragraph gaps line up, which step 2's
gutter test prevents. All thresholds are multiples of the median text height. Pure
functions, no I/O.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median

from ocrflow.engines.bands import (
    B,
    bottom_edge,
    free_strips,
    horizontal_bands,
    left_edge,
    right_edge,
    split_columns,
    top_edge,
)
from ocrflow.engines.boxes import starts_mid_sentence
from ocrflow.engines.form_rows import Row, reads_across, rows_across
from ocrflow.engines.section_edges import heads_next, stands_over


@dataclass(frozen=True, slots=True)
class CutOptions:
    """Thresholds in text heights."""

    #: Narrowest vertical gap that separates columns. The detector pads each line's box by
    #: about a quarter of a line at both ends, so LaTeX's 10-pt gutter between justified
    #: columns of 10-pt type leaves a third of a line between their boxes (half a line, the
    #: former value, read such pages band by band).
    gutter: float = 0.25
    #: Widest gap between bands of one multi-column section.
    max_join: float = 3.0
    #: A header (footer) band is at most this tall, and set off by at least ``furniture_gap``.
    furniture_height: float = 2.5
    furniture_gap: float = 1.2
    #: ... and lies within this share of the text's height from its top (bottom).
    furniture_zone: float = 0.1
    #: A one-line band holding a page number needs only this gap: running heads are often
    #: set closer to the body than paragraphs are apart, but a lone number says what they
    #: are (the detector's padding can leave next to no gap at all).
    folio_gap: float = 0.1
    folio_height: float = 1.6
    #: A running head is short: a band of more words is body text.
    furniture_words: int = 15
    #: Lines of text a page needs under (over) a head that has no page number in it.
    furniture_body: int = 6
    #: A band across the columns at most this tall, in type this ratio off the body's or
    #: narrower than the columns, interrupting them (a pull quote), is read after the first.
    insert_height: float = 6.0
    insert_size: float = 1.2


#: A page number as printed: "17", "— 170 —", "xiv", "Seite 3", "Page 3 of 12".
_FOLIO = re.compile(
    r"[-–—.\s]*((page|seite|p\.)\s*)?(\d{1,4}|[ivxlc]{1,6}|[IVXLC]{1,6})(\s*(of|/|von)\s*\d{1,4})?[-–—.\s]*",
    re.IGNORECASE,
)


#: The role of a region: the running header, the body, or the running footer.
HEADER, BODY, FOOTER = "header", "body", "footer"
#: ... or a pull quote across the columns, after the first one (``inserts.INSERT``), or one
#: row of a form read across (``form_rows.py``).
INSERT, ROW = "insert", "row"


def reading_regions(boxes: Sequence[B], options: CutOptions | None = None) -> list[list[B]]:
    """``boxes`` grouped into regions, the regions in reading order (module docstring)."""
    return [region for _, region in labelled_regions(boxes, options)]


def labelled_regions(
    boxes: Sequence[B], options: CutOptions | None = None
) -> list[tuple[str, list[B]]]:
    """``reading_regions`` with each region's role: ``HEADER``, ``BODY`` or ``FOOTER``."""
    if not boxes:
        return []
    options = options or CutOptions()
    height = median(b.text_height for b in boxes)
    header, body, footer = _furniture(list(boxes), height, options)
    cut = _cut(body, height, options) if body else []
    regions = [(_role(region), list(region)) for region in cut]
    head = [(HEADER, header)] if header else []
    return head + regions + ([(FOOTER, footer)] if footer else [])


def _furniture(
    boxes: list[B], height: float, options: CutOptions
) -> tuple[list[B], list[B], list[B]]:
    """Header band, body, footer band (either band may be empty)."""
    bands = horizontal_bands(boxes)
    if len(bands) < 2:
        return [], boxes, []
    top, bottom = min(b.y0 for b in boxes), max(b.y1 for b in boxes)
    zone = options.furniture_zone * (bottom - top)
    header = _is_furniture(bands[0], bands[1], bands[1:], height, options) and (
        bottom_edge(bands[0]) - top <= zone
    )
    footer = (
        len(bands) - header >= 2
        and _is_furniture(bands[-1], bands[-2], bands[int(header) : -1], height, options)
        and bottom - top_edge(bands[-1]) <= zone
    )
    body = [b for band in bands[int(header) : len(bands) - int(footer)] for b in band]
    return (bands[0] if header else []), body, (bands[-1] if footer else [])


def _is_furniture(
    band: list[B], neighbour: list[B], rest: list[list[B]], height: float, options: CutOptions
) -> bool:
    """Whether ``band`` is a running head: a few words (``furniture_words``: more is a
    paragraph's first or last lines), set off from the ``neighbour`` band by a paragraph
    gap, or by next to none when it holds a page number. Without a page number, a head
    also needs a page of text under (over) it (``furniture_body`` lines): on a poster or a
    cover the band at the top is the title."""
    tall = bottom_edge(band) - top_edge(band)
    gap = max(top_edge(band) - bottom_edge(neighbour), top_edge(neighbour) - bottom_edge(band))
    if tall > options.furniture_height * height or _words(band) > options.furniture_words:
        return False
    folio = _has_folio(band)
    if gap >= options.furniture_gap * height:
        return folio or sum(len(b) for b in rest) >= options.furniture_body
    line = tall <= options.folio_height * height
    return line and gap >= options.folio_gap * height and folio


def _words(band: list[B]) -> int:
    """Words of the band's text, 0 where the boxes carry none."""
    return sum(len(getattr(b, "text", "").split()) for b in band)


def _has_folio(band: list[B]) -> bool:
    """Whether one of a few boxes of ``band`` is a page number alone."""
    texts = [getattr(b, "text", "") for b in band]
    return len(band) <= 3 and any(_FOLIO.fullmatch(t.strip()) for t in texts if t.strip())


def _role(region: list[B]) -> str:
    return INSERT if isinstance(region, Insert) else ROW if isinstance(region, Row) else BODY


def _cut(boxes: list[B], height: float, options: CutOptions) -> list[list[B]]:
    if len(boxes) < 2:
        return [boxes]
    sections = _sections(horizontal_bands(boxes), height, options)
    if len(sections) > 1:
        parts, i = [], 0
        while i < len(sections):
            end = _insert_end(sections, i, height, options)
            if end is None:
                parts.append(_cut(sections[i], height, options))
                i += 1
            else:
                insert = [b for section in sections[i + 1 : end] for b in section]
                parts.append(_around(sections[i] + sections[end], insert, height, options))
                i = end + 1
        return _join_plain(parts)
    columns = split_columns(boxes, options.gutter * height)
    if len(columns) > 1 and reads_across(columns, height):
        rows: list[list[B]] = [*rows_across(boxes)]
        return rows  # a form: read by rows (``form_rows.py``)
    if len(columns) > 1:
        return [region for column in columns for region in _cut(column, height, options)]
    return [sorted(boxes, key=lambda b: (b.y0, b.x0))]


class Insert(list):  # of boxes of any box type (the cut is generic)
    """A region set aside from the columns it interrupts (a pull quote across them)."""


def _insert_end(sections: list[list[B]], i: int, height: float, options: CutOptions) -> int | None:
    """Index of the section that goes on under a pull quote (one or more sections of
    single lines) after ``sections[i]``, or None."""
    for end in range(i + 2, min(len(sections), i + 5)):
        insert = [b for section in sections[i + 1 : end] for b in section]
        if _spans_columns(sections[i], insert, sections[end], height, options):
            return end
    return None


def _spans_columns(
    above: list[B], insert: list[B], below: list[B], height: float, options: CutOptions
) -> bool:
    """Whether ``insert`` is a short band across the columns of ``above`` and ``below`` that
    go on under it: the same columns either side, every column of ``above`` ending in a
    full line (its paragraph goes on), and the band set in, in other type or narrower."""
    gutter = options.gutter * height
    if bottom_edge(insert) - top_edge(insert) > options.insert_height * height:
        return False
    columns = split_columns(above + below, gutter)
    top = split_columns(above, gutter)
    if (
        len(columns) < 2
        or len(top) != len(columns)
        or len(split_columns(below, gutter)) != len(columns)
    ):
        return False
    if not all(_ends_full(column, height) for column in top):
        return False
    size = median(b.text_height for b in insert)
    other = not (height / options.insert_size < size < height * options.insert_size)
    left, right = min(b.x0 for b in above + below), max(b.x1 for b in above + below)
    narrower = right_edge(insert) - left_edge(insert) < 0.85 * (right - left)
    # A heading across the columns starts at their left edge; a pull quote is set in, or
    # else the columns under it go on mid-sentence (a heading starts something new).
    inset = left_edge(insert) - left > height
    resumed = all(_resumes_sentence(column) for column in split_columns(below, gutter))
    return (inset or resumed) and (other or narrower)


def _resumes_sentence(column: list[B]) -> bool:
    """Whether the column's first line goes on with a sentence begun above (where the boxes
    carry their text)."""
    first = min(column, key=lambda b: (b.y0, b.x0))
    return starts_mid_sentence(str(getattr(first, "text", "")))


def _ends_full(column: list[B], height: float) -> bool:
    last = max(column, key=lambda b: b.y1)
    return max(b.x1 for b in column) - last.x1 <= 2 * height


def _around(
    columns_boxes: list[B], insert: list[B], height: float, options: CutOptions
) -> list[list[B]]:
    """The columns read down past the insert, the insert after the first column."""
    first, *rest = (
        _cut(column, height, options)
        for column in split_columns(columns_boxes, options.gutter * height)
    )
    aside = Insert(sorted(insert, key=lambda b: (b.y0, b.x0)))
    return [*first, aside, *(region for column in rest for region in column)]


def _join_plain(parts: list[list[list[B]]]) -> list[list[B]]:
    """Concatenate the sections' regions, joining neighbouring one-region sections."""
    regions: list[list[B]] = []
    plain_before = False
    for part in parts:
        plain = len(part) == 1
        if plain and plain_before:
            regions[-1] = regions[-1] + part[0]
        else:
            regions.extend(part)
        plain_before = plain
    return regions


def _sections(bands: list[list[B]], height: float, options: CutOptions) -> list[list[B]]:
    """Neighbouring bands that share a gutter, joined (module docstring, step 2)."""
    left = min(b.x0 for band in bands for b in band)
    right = max(b.x1 for band in bands for b in band)
    width = options.gutter * height
    sections = [list(bands[0])]
    for last, band in itertools.pairwise(bands):
        close = top_edge(band) - bottom_edge(last) < options.max_join * height
        alone = len(sections[-1]) == len(last) and stands_over(last, band, height, width)
        if close and not alone and _share_gutter(last, band, sections[-1], (left, right, width)):
            sections[-1].extend(band)
            continue
        if heads_next(sections[-1], last, band, height, width):
            del sections[-1][-len(last) :]
            sections.append(list(last))
        sections.append(list(band))
    return sections


def _share_gutter(
    last: list[B], band: list[B], section: list[B], frame: tuple[float, float, float]
) -> bool:
    """Whether an empty strip ``width`` wide runs through ``last`` and ``band`` with text
    of the section on either side (``frame``: left, right, width). The text either side
    need not reach these bands: a column may end early, a figure label stand alone."""
    left, right, width = frame
    both = section + band
    inner_left = min(x.x1 for x in both)
    inner_right = max(x.x0 for x in both)
    for a0, a1 in free_strips(last, left, right, width):
        for b0, b1 in free_strips(band, left, right, width):
            if max(a0, b0, inner_left) + width <= min(a1, b1, inner_right):
                return True
    return False
