"""The ``alto`` and ``hocr`` sinks on built documents: a page of every label, validity
against the vendored ALTO 4.4 XSD (offline) and that the schema rejects bad values, the
sinks' files and keys, and characters XML cannot hold. Where the estimated boxes land (no
boxes, turned pages, text-layer pages): test_alto_hocr_estimates.py. The checks are in
alto_hocr_helpers.py, shared with tests/integration.
"""

from __future__ import annotations

import pytest
from hocr_tools_lib.utils.node_utils import get_bbox, get_prop
from lxml import etree, html

from ocrflow.document import Page
from ocrflow.sinks.alto import AltoSink, alto_key, alto_schema_path, render_alto
from ocrflow.sinks.base import DocumentMeta, FinishedDocument
from ocrflow.sinks.hocr import HocrSink, hocr_key, render_hocr
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
from tests.unit.sinks.alto_hocr_helpers import (
    NS,
    alto_pages,
    alto_schema,
    assert_same_words,
    assert_valid,
    document_of,
)

# -- fixtures ----------------------------------------------------------------------------------


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
    """The vendored ALTO schema, parsed once for this module."""
    return alto_schema()


# -- tests -------------------------------------------------------------------------------------


def test_a_page_of_every_label_validates_and_both_formats_agree(schema) -> None:
    document = document_of(_rich_page())
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
    alto = etree.fromstring(render_alto(document_of(_rich_page())))
    line = alto.find(".//a:TextBlock[@ID='p1_b3']/a:TextLine", NS)
    kinds = [etree.QName(e).localname for e in line]
    assert kinds == ["String", "SP", "String", "SP", "String", "SP", "String"]
    first_gap = line[1]
    assert (first_gap.get("HPOS"), first_gap.get("WIDTH")) == ("160", "10")


def test_the_schema_bites(schema) -> None:
    alto = render_alto(document_of(_rich_page()))
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
    document = document_of(page)
    alto = render_alto(document)
    assert_valid(schema, alto)
    assert [w for w, _, _ in assert_same_words(alto, render_hocr(document))[1]] == ["ok"]
