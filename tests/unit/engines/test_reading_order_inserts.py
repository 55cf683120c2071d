"""Inserts and running heads in the reading order, from synthetic line boxes: a pull quote
across two columns, a caption inside a column, a page number set close to the body, and a
curved page whose columns' boxes overlap by a few pixels."""

from __future__ import annotations

from ocrflow.engines.geometry import PageFrame, ocr_blocks
from ocrflow.engines.inserts import CAPTION, INSERT
from ocrflow.engines.layout import TextBox, laid_out
from ocrflow.engines.xycut import BODY, HEADER
from ocrflow.types import BlockLabel

HEIGHT = 20.0
LEADING = 26.0


def line(x0: float, y0: float, x1: float, text: str, height: float = HEIGHT) -> TextBox:
    """A level text line ``height`` px high."""
    return TextBox(x0, y0, x1, y0 + height, text, 0.99, height)


def lines(x0: float, x1: float, y0: float, names: list[str], last_short: bool) -> list[TextBox]:
    """Stacked full lines, the last one short when it ends a paragraph."""
    found = []
    for i, name in enumerate(names):
        short = last_short and i == len(names) - 1
        found.append(line(x0, y0 + i * LEADING, x0 + (x1 - x0) / 3 if short else x1, name))
    return found


def texts(boxes: list[TextBox]) -> list[str]:
    """The first word of each paragraph, in reading order."""
    return [p.text.split()[0] for p in laid_out(boxes)]


def pull_quote_page() -> list[TextBox]:
    """Two columns whose paragraphs run on under a pull quote in large type set across
    both of them, and end after it."""
    left_top = lines(100, 580, 100, ["La", "Lb", "Lc", "Ld"], last_short=False)
    right_top = lines(620, 1100, 100, ["Ra", "Rb", "Rc", "Rd"], last_short=False)
    quote = [line(250, 260, 950, "Quote-one", 36), line(250, 305, 950, "Quote-two", 36)]
    left_bottom = lines(100, 580, 380, ["Le", "Lf", "Lg"], last_short=True)
    right_bottom = lines(620, 1100, 380, ["Re", "Rf", "Rg"], last_short=True)
    return right_bottom + quote + left_top + right_top + left_bottom


def test_a_pull_quote_does_not_cut_the_columns() -> None:
    order = [p.text.split("\n") for p in laid_out(pull_quote_page())]
    flat = [word for paragraph in order for word in paragraph]
    # Each column read down past the quote; the quote after the column it interrupts.
    assert flat.index("Ld") < flat.index("Le") < flat.index("Quote-one") < flat.index("Ra")
    assert flat.index("Rd") < flat.index("Re")


def test_a_pull_quote_is_its_own_block_with_the_insert_role() -> None:
    quote = [p for p in laid_out(pull_quote_page()) if "Quote-one" in p.text]
    assert len(quote) == 1
    assert quote[0].text == "Quote-one\nQuote-two"
    assert quote[0].region == INSERT


def test_a_title_between_two_articles_still_cuts_the_columns() -> None:
    """The first article ends (short last line in its last column), a new one starts under
    a title across the columns: read the first article, the title, then the second."""
    left_top = lines(100, 580, 100, ["La", "Lb", "Lc", "Ld"], last_short=False)
    right_top = lines(620, 1100, 100, ["Ra", "Rb", "Rc", "Rd"], last_short=True)
    title = [line(250, 260, 950, "Title", 36)]
    left_bottom = lines(100, 580, 340, ["Le", "Lf"], last_short=True)
    right_bottom = lines(620, 1100, 340, ["Re", "Rf"], last_short=True)
    order = texts(title + left_bottom + right_bottom + right_top + left_top)
    assert order == ["La", "Ra", "Title", "Le", "Re"]


def flush_quote_page(below: list[str]) -> list[TextBox]:
    """Two columns under a pull quote in large type set flush with their left edge (no
    inset tells it from a title), the left column's paragraph going on under it with the
    ``below`` lines, then a new paragraph."""
    left_top = lines(100, 580, 100, ["La", "Lb", "Lc", "Ld"], last_short=False)
    right_top = lines(620, 1100, 100, ["Ra", "Rb", "Rc", "Rd"], last_short=False)
    quote = [line(110, 260, 950, "Quote-one", 36), line(110, 305, 950, "Quote-two", 36)]
    left_bottom = lines(100, 580, 380, below, last_short=True)
    left_next = lines(100, 580, 380 + 3 * LEADING + 20, ["Lx", "Ly"], last_short=True)
    right = [{"l": "r", "L": "R"}[w[0]] + w[1:] for w in below]
    right_bottom = lines(620, 1100, 380, right, last_short=True)
    return right_bottom + quote + left_top + right_top + left_bottom + left_next


def test_a_flush_pull_quote_does_not_cut_columns_that_go_on_mid_sentence() -> None:
    paragraphs = laid_out(flush_quote_page(["le", "lf", "lg"]))
    flat = [word for p in paragraphs for word in p.text.split("\n")]
    # Each column read down past the quote; the quote after the paragraph it interrupts
    # (its second half, "le"), before the column's next paragraph.
    assert flat.index("Ld") < flat.index("le") < flat.index("Quote-one") < flat.index("Lx")
    assert flat.index("Lx") < flat.index("Ra") < flat.index("Rd") < flat.index("re")
    quote = next(p for p in paragraphs if "Quote-one" in p.text)
    assert quote.region == INSERT


def test_a_flush_band_over_columns_that_start_afresh_still_cuts_them() -> None:
    """The same page with capitals under the band: new paragraphs, as under a title."""
    order = texts(flush_quote_page(["Le", "Lf", "Lg"]))
    assert order == ["La", "Ra", "Quote-one", "Le", "Lx", "Re"]


def test_a_caption_in_the_columns_type_under_a_figure_follows_the_paragraph() -> None:
    """A caption set like the text, flush left, right under a figure's gap: read after the
    paragraph the figure interrupts."""
    above = lines(100, 700, 100, ["Aa", "Ab", "Ac"], last_short=False)
    caption = [line(100, 500, 600, "Fig.-2-the-pier")]
    below = lines(100, 700, 560, ["ba", "bb", "bc"], last_short=True)
    after = lines(100, 700, 670, ["Ca", "Cb"], last_short=True)
    paragraphs = laid_out(after + caption + below + above)
    assert [p.text.split()[0] for p in paragraphs] == ["Aa", "ba", "Fig.-2-the-pier", "Ca"]
    assert paragraphs[2].region == CAPTION


def test_a_boxed_note_between_the_halves_of_a_sentence_follows_the_paragraph() -> None:
    """A note in a box, nearly flush (its padding) and in nearly the column's type: the
    paragraph goes on under it mid-sentence, so the note is not part of it."""
    above = lines(100, 700, 100, ["Aa", "Ab", "Ac"], last_short=False)
    note = [line(118, 230, 600, "Note-one", 18), line(118, 256, 560, "Note-two", 18)]
    below = lines(100, 700, 320, ["goes-on", "bb"], last_short=True)
    after = lines(100, 700, 400, ["Ca", "Cb"], last_short=True)
    paragraphs = laid_out(after + note + below + above)
    assert [p.text.split()[0] for p in paragraphs] == ["Aa", "goes-on", "Note-one", "Ca"]


def test_paragraphs_set_like_the_column_are_never_moved() -> None:
    """A paragraph in the column's type, flush and a paragraph gap down, between a full
    last line and a block that starts in lower case: it is text, it stays where it is."""
    above = lines(100, 700, 100, ["Aa", "Ab", "Ac"], last_short=False)
    middle = lines(100, 700, 100 + 3 * LEADING + 12, ["Ba", "Bb", "Bc"], last_short=False)
    below = lines(100, 700, 100 + 6 * LEADING + 24, ["and-so", "cb"], last_short=True)
    order = texts(below + middle + above)
    assert order == ["Aa", "Ba", "and-so"]


def caption_page() -> list[TextBox]:
    """One column: a paragraph broken by a figure, its caption in small type under it, and
    the paragraph going on below."""
    above = lines(100, 700, 100, ["Aa", "Ab", "Ac"], last_short=False)
    caption = [line(250, 500, 550, "Fig.-1-the-harbour", 14)]
    below = lines(100, 700, 540, ["Ba", "Bb", "Bc"], last_short=True)
    after = lines(100, 700, 650, ["Ca", "Cb"], last_short=True)
    return after + caption + below + above


def test_a_caption_follows_the_paragraph_it_interrupts() -> None:
    paragraphs = laid_out(caption_page())
    firsts = [p.text.split()[0] for p in paragraphs]
    assert firsts == ["Aa", "Ba", "Fig.-1-the-harbour", "Ca"]
    roles = {p.text.split()[0]: p.region for p in paragraphs}
    assert roles["Fig.-1-the-harbour"] == CAPTION
    assert roles["Aa"] == roles["Ca"] == BODY


def test_a_caption_between_two_paragraphs_stays_in_place() -> None:
    """When the paragraph above ends (short last line), nothing is interrupted."""
    above = lines(100, 700, 100, ["Aa", "Ab", "Ac"], last_short=True)
    caption = [line(250, 500, 550, "Fig.", 14)]
    below = lines(100, 700, 540, ["Ba", "Bb"], last_short=True)
    assert texts(below + caption + above) == ["Aa", "Fig.", "Ba"]


def test_a_page_number_close_to_the_body_is_a_page_header() -> None:
    """A running head set a third of a line above the body (the gap of a lexicon page)."""
    head = [line(100, 100, 140, "12"), line(400, 100, 800, "Running-title")]
    body = lines(100, 1100, 100 + HEIGHT + 8, [f"B{i}" for i in range(30)], last_short=True)
    paragraphs = laid_out(body + head)
    assert [p.region for p in paragraphs[:2]] == [HEADER, HEADER]
    blocks = ocr_blocks(paragraphs, PageFrame(1200, 1000))
    assert blocks[0].label == BlockLabel.PAGE_HEADER
    assert all(b.label != BlockLabel.PAGE_HEADER for b in blocks[2:])


def test_a_number_starting_the_body_with_a_paragraph_gap_is_not_enough_without_it() -> None:
    """A first line that is not a page number, set as close, stays in the body."""
    head = [line(100, 100, 700, "Introduction-to-the-matter")]
    body = lines(100, 1100, 100 + HEIGHT + 8, [f"B{i}" for i in range(30)], last_short=True)
    assert all(p.region == BODY for p in laid_out(body + head))


def test_columns_whose_boxes_touch_on_a_curved_page_are_read_one_after_the_other() -> None:
    """The detector's padding makes the left column's lower lines reach a few pixels into
    the right column's upper lines' x-range: no straight gutter, yet two columns."""
    left = [line(100, 100 + i * LEADING, 592 + i * 0.4, f"L{i}") for i in range(20)]
    right = [line(585 - i * 0.4, 100 + i * LEADING, 1080, f"R{i}") for i in range(20)]
    order = [w for p in laid_out(right + left) for w in p.text.split("\n")]
    assert order == [f"L{i}" for i in range(20)] + [f"R{i}" for i in range(20)]


def test_a_paragraph_across_the_page_is_no_half_of_a_narrow_block_over_it() -> None:
    """A table's two-line header cell at the right, the table's row set in under it, a
    heading under the table's gap, then a paragraph across the page: the paragraph
    overlaps the cell and starts at the left, yet is not the cell's text going on (the row
    and the heading were read after it)."""
    cell = [line(900, 100, 1080, "Inference"), line(900, 126, 1075, "time")]
    row = [line(250, 200, 1000, "Indented")]
    heading = [line(100, 420, 500, "Heading")]
    paragraph = lines(100, 1100, 460, ["We", "picked", "the"], last_short=True)
    assert texts(paragraph + heading + row + cell) == ["Inference", "Indented", "Heading", "We"]
