"""Checks for ALTO and hOCR output, shared by the sink tests here and tests/integration:
ALTO validates against the vendored ALTO 4.4 XSD (offline), every box lies inside its
parent, hOCR parses with hocr-tools and holds the same words at the same boxes as the ALTO,
and a page's words are the Markdown's. Also the built document the sink tests render.
"""

from __future__ import annotations

import difflib
import io
import re
from contextlib import redirect_stderr
from pathlib import Path

from hocr_tools_lib.tools.hocr_check import Checker
from hocr_tools_lib.utils.node_utils import get_bbox, get_prop
from lxml import etree, html

from ocrflow.document import Document, Page, plain_lines
from ocrflow.sinks.alto import ALTO_NAMESPACE, alto_schema_path
from ocrflow.types import DocStatus

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


# -- a built document --------------------------------------------------------------------------


def document_of(*pages: Page, engine: str = "tesseract") -> Document:
    """A finished document of ``pages``, its source name full of characters to escape."""
    meta = {"rel": "in/doc.pdf", "engine": engine, "source_name": 'odd "name"; <&>.pdf'}
    return Document("d1", "/data/in/doc.pdf", DocStatus.OK, pages, len(pages), metadata=meta)
