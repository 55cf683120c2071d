"""hOCR: ``hocr/<rel>.hocr``, one XHTML file a document (hOCR 1.2).

Each page is an ``ocr_page`` (``image``, ``bbox`` and ``ppageno`` in its title), each block
a container whose class says what it is (``ocr_carea`` for text; the hOCR float classes
``ocr_header``, ``ocr_footer``, ``ocr_table`` and ``ocr_image`` for running heads, tables
and figures) holding one ``ocr_par``, each line an ``ocr_line``, each word an ``ocrx_word``
with its ``bbox`` and ``x_wconf`` (0..100). Our own label stays in ``data-label`` (and the
engine's in ``data-source-label``), so nothing of the model is lost to hOCR's vocabulary.
Coordinates are pixels of the page as ``sinks.layout_pages`` sizes it; a block whose box
was estimated says so in ``data-geometry="estimated"``.

Built with the standard library's ElementTree, which escapes text and attributes.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from ocrflow.document import Document
from ocrflow.sinks.base import DocumentFileSink
from ocrflow.sinks.layout_pages import (
    PixelBlock,
    PixelBox,
    PixelPage,
    engine_name,
    ocrflow_version,
    pixel_page,
    source_name,
    xml_safe,
)
from ocrflow.storage.local import Store
from ocrflow.storage.names import safe_relpath
from ocrflow.types import BlockLabel

XHTML_NAMESPACE = "http://www.w3.org/1999/xhtml"
#: The hOCR container class of each label; the rest are ``ocr_carea``.
BLOCK_CLASSES: dict[BlockLabel, str] = {
    BlockLabel.PAGE_HEADER: "ocr_header",
    BlockLabel.PAGE_FOOTER: "ocr_footer",
    BlockLabel.TABLE: "ocr_table",
    BlockLabel.FIGURE: "ocr_image",
}
CAPABILITIES = (
    "ocr_page ocr_carea ocr_par ocr_line ocrx_word "
    "ocr_header ocr_footer ocr_table ocr_image ocrp_wconf"
)


def hocr_key(rel: str) -> str:
    """Where a document's hOCR goes: ``hocr/<rel>.hocr``."""
    return f"hocr/{safe_relpath(rel)}.hocr"


def render_hocr(document: Document) -> bytes:
    """The document as an hOCR (XHTML) file, UTF-8."""
    name = source_name(document)
    engine = engine_name(document)
    html = ET.Element("html", {"xmlns": XHTML_NAMESPACE})
    head = ET.SubElement(html, "head")
    ET.SubElement(head, "title").text = name
    ET.SubElement(
        head, "meta", {"http-equiv": "Content-Type", "content": "text/html; charset=utf-8"}
    )
    ET.SubElement(
        head, "meta", {"name": "ocr-system", "content": f"ocrflow {ocrflow_version()} ({engine})"}
    )
    ET.SubElement(head, "meta", {"name": "ocr-capabilities", "content": CAPABILITIES})
    ET.SubElement(
        head, "meta", {"name": "ocr-number-of-pages", "content": str(len(document.pages))}
    )
    body = ET.SubElement(html, "body")
    for page in document.pages:
        _page(body, pixel_page(page), name)
    ET.indent(html, space=" ")
    # No self-closing tags: an HTML parser reads ``<div/>`` as an open ``<div>``.
    markup = ET.tostring(html, encoding="unicode", short_empty_elements=False)
    head_lines = '<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE html>\n'
    return (head_lines + markup + "\n").encode()


def _page(body: ET.Element, page: PixelPage, name: str) -> None:
    n = page.number
    title = f"image {_quoted(name)}; bbox 0 0 {page.width} {page.height}; ppageno {n - 1}"
    attributes = {"class": "ocr_page", "id": f"page_{n}", "title": title}
    if page.size_source != "engine":
        attributes["data-size"] = page.size_source
    if page.confidence is not None:
        attributes["data-confidence"] = f"{page.confidence:.4f}"
    element = ET.SubElement(body, "div", attributes)
    for b, block in enumerate(page.blocks, 1):
        _block(element, block, f"{n}_{b}", page.text_angle)


def _block(parent: ET.Element, block: PixelBlock, ident: str, angle: int) -> None:
    attributes = {
        "class": BLOCK_CLASSES.get(block.label, "ocr_carea"),
        "id": f"block_{ident}",
        "title": _bbox(block.box),
        "data-label": str(block.label),
    }
    if block.source_label:
        attributes["data-source-label"] = xml_safe(block.source_label)
    if block.estimated:
        attributes["data-geometry"] = "estimated"
    container = ET.SubElement(parent, "div", attributes)
    if not block.lines:
        return
    par = ET.SubElement(
        container, "p", {"class": "ocr_par", "id": f"par_{ident}", "title": _bbox(block.box)}
    )
    for i, line in enumerate(block.lines, 1):
        title = _bbox(line.box) + (f"; textangle {angle}" if angle else "")
        span = ET.SubElement(
            par, "span", {"class": "ocr_line", "id": f"line_{ident}_{i}", "title": title}
        )
        for j, word in enumerate(line.words, 1):
            title = _bbox(word.box)
            if word.confidence is not None:
                title += f"; x_wconf {round(100 * min(1.0, max(0.0, word.confidence)))}"
            ET.SubElement(
                span, "span", {"class": "ocrx_word", "id": f"word_{ident}_{i}_{j}", "title": title}
            ).text = word.text


def _bbox(box: PixelBox) -> str:
    return f"bbox {box.x0} {box.y0} {box.x1} {box.y1}"


def _quoted(text: str) -> str:
    """A double-quoted hOCR string on one line. Readers split ``title`` at every ``;``
    (hocr-tools does), quotes or not, so ``;`` and ``"`` are percent-encoded, as in a URI."""
    flat = " ".join(text.split()).replace(";", "%3B").replace('"', "%22")
    return f'"{flat}"'


class HocrSink(DocumentFileSink):
    """Writes each document's hOCR file, atomically."""

    def __init__(self, store: Store) -> None:
        super().__init__(store, hocr_key, render_hocr)
