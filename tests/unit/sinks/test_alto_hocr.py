"""The ``alto`` and ``hocr`` sinks on built documents: ALTO validates against the vendored
ALTO 4.4 XSD (offline), every box lies inside its parent, hOCR parses with hocr-tools and
holds the same words at the same boxes, and the estimates (no boxes, turned pages, text-layer
pages) land where they should. The checks are shared with tests/integration.
"""

from __future__ import annotations

import difflib
import io
import re
from contextlib import redirect_stderr
from pathlib import Path

import pytest
from hocr_tools_lib.tools.hocr_check import Checker
from hocr_tools_lib.utils.node_utils import get_bbox, get_prop
from lxml import etree, html

from ocrflow.document import Document, Page, plain_lines
from ocrflow.sinks.alto import ALTO_NAMESPACE, AltoSink, alto_key, alto_schema_path, render_alto
from ocrflow.sinks.base import DocumentMeta, FinishedDocument
from ocrflow.sinks.hocr import HocrSink, hocr_key, render_hocr
from ocrflow.sinks.layout_pages import NOMINAL_SIZE
from ocrflow.storage.local import LocalStore
from ocrflow.types import (
    Block,
    BlockLabel,
    DocStatus,
    DocumentResult,
    ImageSize,
    Line,
    PageResult,
    Route,
    Word,
)

NS = {"a": ALTO_NAMESPACE}
Box = tuple[float, float, float, float]
_IMAGE_LINK = re.compile(r"!\[[^\]]*\]\([^)]*\)")

# -- shared checks -----------------------------------------------------------------------------


def alto_schema() -> etree.XMLSchema:
    """The vendored XSD, read without any network access."""
    parser = etree.XMLParser(no_network=True)
    return etree.XMLSchema(etree.parse(str(alto_schema_path()), parser))


def assert_valid(schema: etree.XMLSchema, data: bytes) -> None:
    """``data`` validates against the ALTO schema (the errors are the message if not)."""
    ok = schema.validate(etree.fromstring(data))
    assert ok, "\n".join(str(e) for e in schema.error_log)


def _box(element: etree._Element) -> Box:
    x, y = float(element.get("HPOS")), float(element.get("VPOS"))
    return (x, y, x + float(element.get("WIDTH")), y + float(element.get("HEIGHT")))


def _inside(inner: Box, outer: Box) -> bool:
    return (
        outer[0] <= inner[0] < inner[2] <= outer[2] and outer[1] <= inner[1] < inner[3] <= outer[3]
    )


def alto_pages(data: bytes) -> dict[int, list[tuple[str, Box, str | None]]]:
    """Each page's words ``(CONTENT, box, WC)`` in order, asserting that every block lies
    inside its page, every TextLine inside its TextBlock, every String inside its TextLine,
    each with a positive width and height."""
    pages = {}
    for page in etree.fromstring(data).iterfind(".//a:Page", NS):
        page_box = (0.0, 0.0, float(page.get("WIDTH")), float(page.get("HEIGHT")))
        words = []
        for kind in ("TextBlock", "ComposedBlock", "Illustration"):
            for block in page.iterfind(f".//a:{kind}", NS):
                assert _inside(_box(block), page_box), (block.get("ID"), _box(block), page_box)
        for block in page.iterfind(".//a:TextBlock", NS):
            for line in block.iterfind("a:TextLine", NS):
                assert _inside(_box(line), _box(block)), line.get("ID")
                for string in line.iterfind("a:String", NS):
                    assert _inside(_box(string), _box(line)), string.get("ID")
                    words.append((string.get("CONTENT"), _box(string), string.get("WC")))
        pages[int(float(page.get("PHYSICAL_IMG_NR")))] = words
    return pages


def hocr_pages(source: Path | bytes) -> dict[int, list[tuple[str, Box, str | None]]]:
    """Each page's words ``(text, bbox, x_wconf)`` as hocr-tools reads them, after its
    conformance check (``hocr-check``) passed without a ``not ok``."""
    handle = io.BytesIO(source) if isinstance(source, bytes) else source
    report = io.StringIO()
    with redirect_stderr(report):
        Checker(handle, no_overlap=True).check()
    assert "not ok" not in report.getvalue(), report.getvalue()
    tree = html.parse(io.BytesIO(source) if isinstance(source, bytes) else str(source))
    pages = {}
    for page in tree.xpath("//*[@class='ocr_page']"):
        words = []
        for word in page.xpath(".//*[@class='ocrx_word']"):
            bbox = get_bbox(word)
            assert bbox is not None
            words.append(
                (word.text_content(), tuple(float(v) for v in bbox), get_prop(word, "x_wconf"))
            )
        pages[int(get_prop(page, "ppageno") or 0) + 1] = words
    return pages


def assert_same_words(alto: bytes, hocr: Path | bytes) -> dict[int, list]:
    """The ALTO and the hOCR hold the same words at the same boxes with the same scores."""
    from_alto, from_hocr = alto_pages(alto), hocr_pages(hocr)
    assert from_alto.keys() == from_hocr.keys()
    for number, words in from_alto.items():
        assert [(t, b) for t, b, _ in words] == [(t, b) for t, b, _ in from_hocr[number]]
        for (_, _, wc), (_, _, wconf) in zip(words, from_hocr[number], strict=True):
            assert (wc is None) == (wconf is None)
            if wc is not None:
                assert int(wconf) == round(100 * float(wc))
    return from_alto


def markdown_words(markdown: str) -> list[str]:
    """The printed words of Markdown (marks, links to figures and table rules left out)."""
    text = _IMAGE_LINK.sub(" ", markdown)
    return _tokens(w for line in plain_lines(text) for w in line.split())


def _tokens(words) -> list[str]:
    # Table pipes are Markdown to plain_lines but may be text to an engine: left out of both.
    return [t for t in (w.replace("|", "") for w in words) if t]


def overlap(expected: list[str], got: list[str]) -> float:
    """The share of ``expected`` found in ``got`` in the same order."""
    if not expected:
        return 1.0 if not got else 0.0
    matcher = difflib.SequenceMatcher(None, expected, _tokens(got), autojunk=False)
    return sum(block.size for block in matcher.get_matching_blocks()) / len(expected)


# -- fixtures ----------------------------------------------------------------------------------


def _document(*pages: Page, engine: str = "tesseract") -> Document:
    meta = {"rel": "in/doc.pdf", "engine": engine, "source_name": 'odd "name"; <&>.pdf'}
    return Document("d1", "/data/in/doc.pdf", DocStatus.OK, pages, len(pages), metadata=meta)


def _rich_page() -> Page:
    words = (
        Word("Tom", (0.1, 0.30, 0.16, 0.33), 0.91),
        Word("&", (0.17, 0.30, 0.19, 0.33), 0.5),
        Word('"Jerry"', (0.2, 0.30, 0.3, 0.33), None),
        Word("<b>;", (0.31, 0.30, 0.36, 0.33), 1.0),
    )
    blocks = (
        Block(BlockLabel.PAGE_HEADER, "Running head", (0.1, 0.02, 0.5, 0.04), 0.8),
        Block(
            BlockLabel.TITLE,
            "# A *title* here",
            (0.1, 0.1, 0.7, 0.15),
            0.99,
            (Line("A title here", (0.1, 0.1, 0.7, 0.15), 0.99),),
            "Title",
        ),
        Block(
            BlockLabel.TEXT,
            'Tom & "Jerry" <b>;',
            (0.1, 0.3, 0.36, 0.33),
            0.8,
            (Line('Tom & "Jerry" <b>;', (0.1, 0.3, 0.36, 0.33), 0.8, words),),
        ),
        Block(BlockLabel.FIGURE, "<!--figure:0-->", (0.1, 0.4, 0.6, 0.6)),
        Block(BlockLabel.TABLE, "| a | b |\n|---|---|\n| 1 | 2 |", (0.1, 0.65, 0.6, 0.75), 0.7),
        Block(BlockLabel.PAGE_FOOTER, "Page 3", (0.45, 0.96, 0.55, 0.98)),
    )
    return Page(1, "", Route.ENGINE, blocks=blocks, size=ImageSize(1000, 1400), confidence=0.84)


@pytest.fixture(scope="module")
def schema() -> etree.XMLSchema:
    return alto_schema()


# -- tests -------------------------------------------------------------------------------------


def test_a_page_of_every_label_validates_and_both_formats_agree(schema) -> None:
    document = _document(_rich_page())
    alto, hocr = render_alto(document), render_hocr(document)
    assert_valid(schema, alto)
    words = assert_same_words(alto, hocr)[1]
    texts = [w for w, _, _ in words]
    assert " ".join(texts) == 'Running head A title here Tom & "Jerry" <b>; a b 1 2 Page 3'
    # Engine words keep their boxes (in pixels of the 1000 x 1400 image) and scores.
    assert words[5] == ("Tom", (100.0, 420.0, 160.0, 462.0), "0.91")
    assert words[7][2] is None  # no score: no WC
    root = etree.fromstring(alto)
    page = root.find(".//a:Page", NS)
    assert (page.get("WIDTH"), page.get("HEIGHT"), page.get("PC")) == ("1000", "1400", "0.84")
    figure = root.find(".//a:Illustration", NS)
    assert figure.get("TYPE") == "figure" and figure.get("TAGREFS") == "LABEL_figure"
    table = root.find(".//a:ComposedBlock", NS)
    assert table.get("TYPE") == "table" and table.find("a:TextBlock", NS) is not None
    tags = {t.get("ID"): t.get("LABEL") for t in root.iterfind(".//a:LayoutTag", NS)}
    assert tags["LABEL_page_header"] == "page_header" and len(tags) == 6
    assert root.findtext(".//a:fileName", namespaces=NS) == 'odd "name"; <&>.pdf'
    # hOCR: classes by label, our label kept, the image name one parseable string.
    tree = html.fromstring(hocr)
    classes = [e.get("class") for e in tree.xpath("//div[@data-label]")]
    assert classes == [
        "ocr_header",
        "ocr_carea",
        "ocr_carea",
        "ocr_image",
        "ocr_table",
        "ocr_footer",
    ]
    assert tree.xpath("//div[@data-label='title']/@data-source-label") == ["Title"]
    ocr_page = tree.xpath("//*[@class='ocr_page']")[0]
    assert get_prop(ocr_page, "image") == '"odd %22name%22%3B <&>.pdf"'
    assert get_bbox(ocr_page) == (0, 0, 1000, 1400)


def test_strings_are_separated_by_spaces_between_their_boxes(schema) -> None:
    alto = etree.fromstring(render_alto(_document(_rich_page())))
    line = alto.find(".//a:TextBlock[@ID='p1_b3']/a:TextLine", NS)
    kinds = [etree.QName(e).localname for e in line]
    assert kinds == ["String", "SP", "String", "SP", "String", "SP", "String"]
    first_gap = line[1]
    assert (first_gap.get("HPOS"), first_gap.get("WIDTH")) == ("160", "10")


def test_text_layer_pages_get_a_nominal_or_their_pdf_size(schema) -> None:
    lines = (Line("Hello world", (0.1, 0.1, 0.5, 0.12)),)
    block = Block(BlockLabel.TEXT, "Hello world", (0.1, 0.1, 0.5, 0.12), None, lines)
    nominal = Page(1, "Hello world", Route.TEXT_LAYER, blocks=(block,))
    letter = Page(
        2, "Hello world", Route.TEXT_LAYER, blocks=(block,), attributes={"page_points": [612, 792]}
    )
    document = _document(nominal, letter, engine="embedded")
    alto = render_alto(document)
    assert_valid(schema, alto)
    sizes = [
        (p.get("WIDTH"), p.get("HEIGHT")) for p in etree.fromstring(alto).iterfind(".//a:Page", NS)
    ]
    assert sizes == [tuple(str(v) for v in NOMINAL_SIZE), ("2550", "3300")]
    words = assert_same_words(alto, render_hocr(document))
    # The estimated words share the line's width by their length: "Hello" starts it.
    assert words[1][0] == ("Hello", (248.0, 350.0, 699.0, 421.0), None)
    assert words[2][1][1][2] == 1275.0  # "world" ends where the line does (0.5 x 2550)


def test_blocks_without_boxes_are_laid_out_down_the_page_and_marked_estimated(schema) -> None:
    blocks = (
        Block(BlockLabel.SECTION_HEADER, "## First heading"),
        Block(BlockLabel.TEXT, "one two three\nfour five"),
        Block(BlockLabel.LIST_ITEM, "- six"),
    )
    page = Page(1, "", Route.ENGINE, blocks=blocks, size=ImageSize(800, 1000))
    document = _document(page, engine="vllm")
    alto = render_alto(document)
    assert_valid(schema, alto)
    words = assert_same_words(alto, render_hocr(document))[1]
    assert " ".join(w for w, _, _ in words) == "First heading one two three four five six"
    tops = [box[1] for _, box, _ in words]
    assert tops == sorted(tops) and tops[0] >= 50  # reading order, below the top margin
    root = etree.fromstring(alto)
    assert all(
        "GEOMETRY_ESTIMATED" in b.get("TAGREFS") for b in root.iterfind(".//a:TextBlock", NS)
    )
    assert root.find(".//a:OtherTag", NS).get("ID") == "GEOMETRY_ESTIMATED"
    assert len(html.fromstring(render_hocr(document)).xpath("//*[@data-geometry='estimated']")) == 3


def test_a_paragraph_written_as_one_line_is_wrapped_across_the_page(schema) -> None:
    paragraph = " ".join(f"word{i}" for i in range(60))  # 419 characters
    page = Page(
        1, "", Route.ENGINE, blocks=(Block(BlockLabel.TEXT, paragraph),), size=ImageSize(1000, 1400)
    )
    alto = render_alto(_document(page))
    assert_valid(schema, alto)
    lines = etree.fromstring(alto).findall(".//a:TextLine", NS)
    assert len(lines) == 5  # about 90 characters a line
    counts = [len(line.findall("a:String", NS)) for line in lines]
    assert sum(counts) == 60 and max(counts) <= 14
    tops = [int(line.get("VPOS")) for line in lines]
    assert tops == sorted(tops) and len(set(tops)) == 5


def test_a_turned_page_gets_its_words_along_its_lines(schema) -> None:
    # The engine turned the page 90 degrees clockwise to read it: on the page as rendered
    # the line runs up the page, so its first word is at the bottom.
    line = Line("alpha beta gamma", (0.1, 0.2, 0.15, 0.8), 0.9)
    block = Block(BlockLabel.TEXT, "alpha beta gamma", (0.1, 0.2, 0.15, 0.8), 0.9, (line,))
    page = Page(1, "", Route.ENGINE, blocks=(block,), size=ImageSize(1400, 1000), rotation=90)
    document = _document(page)
    alto = render_alto(document)
    assert_valid(schema, alto)
    words = assert_same_words(alto, render_hocr(document))[1]
    assert [w for w, _, _ in words] == ["alpha", "beta", "gamma"]
    bottoms = [box[3] for _, box, _ in words]
    assert bottoms[0] == 800.0 and bottoms[0] > bottoms[1] > bottoms[2]
    assert all(box[0] >= 140 and box[2] <= 210 for _, box, _ in words)  # within the line
    assert etree.fromstring(alto).find(".//a:TextBlock", NS).get("ROTATION") == "90"
    assert (
        "textangle 90"
        in html.fromstring(render_hocr(document)).xpath("//*[@class='ocr_line']/@title")[0]
    )


def test_a_turned_vlm_page_keeps_the_size_of_the_page_as_rendered() -> None:
    # Readers record the page as rendered (its boxes' frame), whatever turn the engine
    # gave the image it read: the size is used as it is.
    block = Block(BlockLabel.TEXT, "x", (0.1, 0.1, 0.2, 0.2))
    attributes = {"rotation": 90, "shrinks": 0}
    page = Page(
        1,
        "x",
        Route.ENGINE,
        blocks=(block,),
        size=ImageSize(1000, 1400),
        rotation=90,
        attributes=attributes,
    )
    page_element = etree.fromstring(render_alto(_document(page))).find(".//a:Page", NS)
    assert (page_element.get("WIDTH"), page_element.get("HEIGHT")) == ("1000", "1400")


def test_the_schema_bites(schema) -> None:
    alto = render_alto(_document(_rich_page()))
    assert_valid(schema, alto)

    def mutated(xpath: str, name: str, value: str | None) -> etree._Element:
        root = etree.fromstring(alto)
        element = root.xpath(xpath, namespaces=NS)[0]
        if value is None:
            del element.attrib[name]
        else:
            element.set(name, value)
        return root

    for xpath, name, value in [
        ("//a:String", "WC", "1.5"),  # WCType is 0..1
        ("//a:Page", "PC", "-0.1"),
        ("//a:String", "CONTENT", None),  # required
        ("//a:TextBlock", "ID", None),  # required
        ("//a:TextBlock", "HPOS", "left"),  # a float
        ("//a:Page", "PHYSICAL_IMG_NR", None),
    ]:
        assert not schema.validate(mutated(xpath, name, value)), (xpath, name, value)
    # ALTO types coordinates as plain xsd:float: a negative WIDTH is schema-valid, so the
    # containment check is what catches it.
    negative = mutated("//a:String", "WIDTH", "-5")
    assert schema.validate(negative)
    with pytest.raises(AssertionError):
        alto_pages(etree.tostring(negative))


def test_the_sinks_write_atomically_under_their_keys_and_skip_failed_documents(tmp_path) -> None:
    store = LocalStore(tmp_path)
    blocks = (Block(BlockLabel.TEXT, "Hello", (0.1, 0.1, 0.3, 0.2), 0.9),)
    page = PageResult(1, "Hello", Route.ENGINE, image_size=ImageSize(100, 100), blocks=blocks)
    meta = DocumentMeta("sub/scan 1.png", "0" * 64, None, "embedded", "fp")
    ok = DocumentResult("a", "/in/sub/scan 1.png", DocStatus.OK, (page,), 1)
    failed = DocumentResult("b", "/in/bad.pdf", DocStatus.FAILED)
    for sink in (AltoSink(store), HocrSink(store)):
        sink.write(FinishedDocument(ok, meta))
        sink.write(FinishedDocument(failed, DocumentMeta("bad.pdf", "1" * 64, None, "e", "fp")))
        sink.close()
    assert alto_key(meta.rel) == "alto/sub/scan 1.png.xml"
    assert hocr_key(meta.rel) == "hocr/sub/scan 1.png.hocr"
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert [p for p in written if not p.startswith(".")] == [
        "alto/sub/scan 1.png.xml",
        "hocr/sub/scan 1.png.hocr",
    ]
    alto = (tmp_path / "alto/sub/scan 1.png.xml").read_bytes()
    assert_valid(alto_schema(), alto)
    assert assert_same_words(alto, tmp_path / "hocr/sub/scan 1.png.hocr")[1][0][0] == "Hello"


def test_the_vendored_schema_is_offline_and_names_its_licence() -> None:
    xsd = alto_schema_path().read_text()
    assert 'schemaLocation="xlink.xsd"' in xsd and "CC BY-SA 4.0" in xsd
    assert "http://www.loc.gov/standards/xlink" not in xsd.split("<xsd:schema", 1)[1][:400]
    readme = (alto_schema_path().parent / "README.md").read_text()
    assert "CC BY-SA 4.0" in readme and "Modified" in readme


def test_characters_xml_cannot_hold_are_left_out(schema) -> None:
    # A text layer can carry control characters; one would make the whole file unreadable.
    words = (Word("ok\x00", (0.1, 0.1, 0.2, 0.2), 0.9), Word("\x07\x1b", (0.3, 0.1, 0.4, 0.2)))
    line = Line("ok\x00 \x07\x1b", (0.1, 0.1, 0.4, 0.2), 0.9, words)
    block = Block(BlockLabel.TEXT, "ok", (0.1, 0.1, 0.4, 0.2), 0.9, (line,), "odd\x01label")
    page = Page(1, "ok", Route.ENGINE, blocks=(block,), size=ImageSize(100, 100))
    document = _document(page)
    alto = render_alto(document)
    assert_valid(schema, alto)
    assert [w for w, _, _ in assert_same_words(alto, render_hocr(document))[1]] == ["ok"]
