"""The document-level running-head pass on synthetic pages: what repeats in the top or
bottom band across pages, or is a bare page number there, becomes furniture; body text
that happens to sit at the top once, tables, and a one-page title do not."""

from __future__ import annotations

from ocrflow.document.furniture import without_furniture
from ocrflow.document.running_heads import heading_key, is_page_number, label_running_heads
from ocrflow.types import Block, BlockLabel, DocStatus, DocumentResult, PageResult, Route

TEXT = BlockLabel.TEXT


def _page(number: int, *blocks: Block) -> PageResult:
    text = "\n\n".join(b.text for b in blocks)
    return PageResult(number, text, Route.TEXT_LAYER, blocks=blocks)


def _top(text: str, label: BlockLabel = TEXT) -> Block:
    return Block(label, text, (0.1, 0.03, 0.9, 0.05))


def _body(text: str, y: float = 0.3) -> Block:
    return Block(TEXT, text, (0.1, y, 0.9, y + 0.2))


def _bottom(text: str) -> Block:
    return Block(TEXT, text, (0.45, 0.95, 0.55, 0.97))


def _labels(page: PageResult) -> list[BlockLabel]:
    return [b.label for b in page.blocks]


def test_page_numbers_are_recognised_and_numbers_compare_equal() -> None:
    for folio in ("17", "Page 3", "- 3 -", "iv", "— 170 —", "Page 3 of 12"):
        assert is_page_number(folio), folio
    for text in ("THE VISION", "by FutureSkill", "Table 3", "17 apples"):
        assert not is_page_number(text), text
    assert heading_key("Chapter 3. Access control 15") == heading_key("Chapter 3 Access Control 16")
    assert heading_key("Preface xi") == heading_key("Preface xii")
    assert heading_key("Vision") != heading_key("Version")


def test_a_repeating_header_with_changing_page_numbers_is_labelled() -> None:
    pages = [
        _page(n, _top(f"Annual report 2024 — page {n}"), _body(f"Body paragraph {n} text."))
        for n in range(1, 5)
    ]
    labelled = label_running_heads(pages)
    for page in labelled:
        assert _labels(page) == [BlockLabel.PAGE_HEADER, TEXT]
        assert page.text == pages[page.page - 1].text, "the text is cut by block, not here"
    dropped = without_furniture(DocumentResult("d", "d.pdf", DocStatus.OK, labelled, 4))
    assert all("Annual report" not in p.text and "Body paragraph" in p.text for p in dropped.pages)


def test_a_body_line_at_the_top_of_one_page_is_not_a_header() -> None:
    pages = [
        _page(1, _top("Introduction to the method", BlockLabel.SECTION_HEADER), _body("a")),
        _page(2, _top("The SQL CREATE PERMISSION statement that is shown"), _body("b")),
        _page(3, _top("continues from the page before and"), _body("c")),
        _page(4, _body("d")),
    ]
    labelled = label_running_heads(pages)
    assert _labels(labelled[0]) == [BlockLabel.SECTION_HEADER, TEXT]
    assert all(_labels(p)[0] == TEXT for p in labelled[1:])


def test_a_table_at_the_top_is_never_relabelled_and_engine_furniture_is_kept() -> None:
    table = Block(BlockLabel.TABLE, "| a | b |", (0.1, 0.02, 0.9, 0.06))
    engine_head = Block(BlockLabel.PAGE_HEADER, "Only here", (0.1, 0.02, 0.9, 0.04))
    pages = [_page(n, table, _body("x")) for n in (1, 2, 3)] + [_page(4, engine_head)]
    labelled = label_running_heads(pages)
    assert [b.label for p in labelled[:3] for b in p.blocks][::2] == [BlockLabel.TABLE] * 3
    assert labelled[3].blocks[0].label is BlockLabel.PAGE_HEADER


def test_a_bare_page_number_at_the_bottom_is_a_footer_but_not_in_the_middle() -> None:
    pages = [
        _page(1, _body("First page body."), _bottom("1")),
        _page(2, _body("Second page body."), _body("42", 0.5), _bottom("- 2 -")),
    ]
    labelled = label_running_heads(pages)
    assert _labels(labelled[0]) == [TEXT, BlockLabel.PAGE_FOOTER]
    assert _labels(labelled[1]) == [TEXT, TEXT, BlockLabel.PAGE_FOOTER]


def test_a_one_page_documents_title_stays_and_only_its_page_number_goes() -> None:
    page = _page(1, _top("THE VISION", BlockLabel.TITLE), _body("by FutureSkill"), _bottom("iv"))
    (labelled,) = label_running_heads([page])
    assert _labels(labelled) == [BlockLabel.TITLE, TEXT, BlockLabel.PAGE_FOOTER]


def test_a_footer_with_the_page_number_counts_from_its_second_page() -> None:
    pages = [
        _page(1, _body("one"), _bottom("© Copyright Corp. 2014. All rights reserved. iii")),
        _page(2, _body("two"), _bottom("© Copyright Corp. 2014. All rights reserved. xi")),
        _page(3, _body("three"), _bottom("Chapter 3. Access control")),
        _page(4, _body("four")),
    ]
    labelled = label_running_heads(pages)
    assert [_labels(p)[-1] for p in labelled] == [
        BlockLabel.PAGE_FOOTER,
        BlockLabel.PAGE_FOOTER,
        TEXT,
        TEXT,
    ]


def test_pages_without_boxes_are_left_as_they_are() -> None:
    page = PageResult(1, "17", Route.ENGINE, blocks=(Block(TEXT, "17"),))
    assert label_running_heads([page]) == (page,)
