"""ALTO: ``alto/<rel>.xml``, one ALTO 4.4 file a document, valid against the ALTO XSD.

Coordinates are pixels (``MeasurementUnit`` ``pixel``) of each page as
``sinks.layout_pages`` sizes it. Each page is a ``Page`` (``PHYSICAL_IMG_NR`` its number,
``PC`` its confidence) with one ``PrintSpace`` covering it, holding the blocks in reading
order:

- text of every kind is a ``TextBlock`` of ``TextLine``\\ s of ``String``\\ s (``CONTENT``,
  ``WC`` 0..1) with an ``SP`` between words;
- a table is a ``ComposedBlock TYPE="table"`` around the ``TextBlock`` of its lines (the
  model has no cells, and ``ComposedBlock`` is where ALTO readers look for tables);
- a figure is an ``Illustration TYPE="figure"``.

Every block refers (``TAGREFS``) to a ``LayoutTag`` naming its label; a block whose box was
estimated also refers to the ``OtherTag`` ``GEOMETRY_ESTIMATED``. The schema ships with the
package (``alto_schema_path``, see ``schemas/README.md``), so outputs can be validated
offline. Built with the standard library's ElementTree, which escapes text and attributes.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from importlib import resources
from pathlib import Path

from ocrflow.document import Document
from ocrflow.sinks.base import DocumentFileSink
from ocrflow.sinks.layout_pages import (
    PixelBlock,
    PixelBox,
    PixelLine,
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

ALTO_NAMESPACE = "http://www.loc.gov/standards/alto/ns-v4#"
ALTO_SCHEMA_URL = "http://www.loc.gov/alto/v4/alto-4-4.xsd"
XSI_NAMESPACE = "http://www.w3.org/2001/XMLSchema-instance"
#: The ``OtherTag`` of blocks whose box ocrflow estimated (the engine gave none).
ESTIMATED_TAG = "GEOMETRY_ESTIMATED"


def alto_key(rel: str) -> str:
    """Where a document's ALTO goes: ``alto/<rel>.xml``."""
    return f"alto/{safe_relpath(rel)}.xml"


def alto_schema_path() -> Path:
    """The vendored ALTO 4.4 XSD (it imports the vendored XLink schema beside it), for
    offline validation, e.g. ``lxml.etree.XMLSchema(file=alto_schema_path())``."""
    return Path(str(resources.files("ocrflow.sinks") / "schemas" / "alto-4-4.xsd"))


def label_tag(label: BlockLabel | str) -> str:
    """The ID of the ``LayoutTag`` for a block label."""
    return f"LABEL_{label}"


def render_alto(document: Document) -> bytes:
    """The document as an ALTO 4.4 file, UTF-8."""
    pages = [pixel_page(page) for page in document.pages]
    root = ET.Element(
        "alto",
        {
            "xmlns": ALTO_NAMESPACE,
            "xmlns:xsi": XSI_NAMESPACE,
            "xsi:schemaLocation": f"{ALTO_NAMESPACE} {ALTO_SCHEMA_URL}",
            "SCHEMAVERSION": "4.4",
        },
    )
    _description(root, document)
    _tags(root, pages)
    layout = ET.SubElement(root, "Layout")
    for page in pages:
        _page(layout, page)
    ET.indent(root, space=" ")
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"


def _description(root: ET.Element, document: Document) -> None:
    description = ET.SubElement(root, "Description")
    ET.SubElement(description, "MeasurementUnit").text = "pixel"
    image = ET.SubElement(description, "sourceImageInformation")
    ET.SubElement(image, "fileName").text = source_name(document)
    processing = ET.SubElement(description, "OCRProcessing", {"ID": "OCR_0"})
    step = ET.SubElement(processing, "ocrProcessingStep")
    ET.SubElement(step, "processingCategory").text = "contentGeneration"
    engine = engine_name(document)
    settings = f"engine={engine}"
    if document.metadata.get("fingerprint"):
        settings += f"; config_fingerprint={xml_safe(str(document.metadata['fingerprint']))}"
    ET.SubElement(step, "processingStepSettings").text = settings
    software = ET.SubElement(step, "processingSoftware")
    ET.SubElement(software, "softwareName").text = "ocrflow"
    ET.SubElement(software, "softwareVersion").text = ocrflow_version()
    ET.SubElement(software, "applicationDescription").text = f"OCR engine: {engine}"


def _tags(root: ET.Element, pages: list[PixelPage]) -> None:
    labels = dict.fromkeys(b.label for page in pages for b in page.blocks)
    estimated = any(b.estimated for page in pages for b in page.blocks)
    if not labels:
        return
    tags = ET.SubElement(root, "Tags")
    for label in labels:
        ET.SubElement(tags, "LayoutTag", {"ID": label_tag(label), "LABEL": str(label)})
    if estimated:
        attributes = {
            "ID": ESTIMATED_TAG,
            "LABEL": "estimated geometry",
            "DESCRIPTION": "the engine gave no box; ocrflow laid the block out down the page",
        }
        ET.SubElement(tags, "OtherTag", attributes)


def _page(layout: ET.Element, page: PixelPage) -> None:
    n = page.number
    attributes = {
        "ID": f"page_{n}",
        "PHYSICAL_IMG_NR": str(n),
        "WIDTH": str(page.width),
        "HEIGHT": str(page.height),
    }
    if page.confidence is not None:
        attributes["PC"] = _score(page.confidence)
    element = ET.SubElement(layout, "Page", attributes)
    space = ET.SubElement(
        element,
        "PrintSpace",
        {"ID": f"p{n}_ps", **_coords(PixelBox(0, 0, page.width, page.height))},
    )
    for b, block in enumerate(page.blocks, 1):
        _block(space, block, f"p{n}_b{b}", page.text_angle)


def _block(parent: ET.Element, block: PixelBlock, ident: str, angle: int) -> None:
    tags = label_tag(block.label) + (f" {ESTIMATED_TAG}" if block.estimated else "")
    base = {"ID": ident, **_coords(block.box), "TAGREFS": tags}
    if angle:
        base["ROTATION"] = str(angle)
    if block.label is BlockLabel.FIGURE:
        ET.SubElement(parent, "Illustration", {**base, "TYPE": "figure"})
        return
    if block.label is BlockLabel.TABLE:
        composed = ET.SubElement(parent, "ComposedBlock", {**base, "TYPE": "table"})
        parent, base = composed, {**base, "ID": f"{ident}_t"}
    text_block = ET.SubElement(parent, "TextBlock", base)
    for i, line in enumerate(block.lines, 1):
        _line(text_block, line, f"{ident}_l{i}")


def _line(block: ET.Element, line: PixelLine, ident: str) -> None:
    element = ET.SubElement(block, "TextLine", {"ID": ident, **_coords(line.box)})
    previous: PixelBox | None = None
    for w, word in enumerate(line.words, 1):
        if previous is not None:
            gap = {"HPOS": str(previous.x1), "VPOS": str(line.box.y0)}
            if word.box.x0 > previous.x1:
                gap["WIDTH"] = str(word.box.x0 - previous.x1)
            ET.SubElement(element, "SP", gap)
        attributes = {"ID": f"{ident}_w{w}", "CONTENT": word.text, **_coords(word.box)}
        if word.confidence is not None:
            attributes["WC"] = _score(word.confidence)
        ET.SubElement(element, "String", attributes)
        previous = word.box


def _coords(box: PixelBox) -> dict[str, str]:
    return {
        "HPOS": str(box.x0),
        "VPOS": str(box.y0),
        "WIDTH": str(box.width),
        "HEIGHT": str(box.height),
    }


def _score(value: float) -> str:
    """A confidence as ALTO wants it: 0..1, a few decimals."""
    return f"{min(1.0, max(0.0, float(value))):.4g}"


class AltoSink(DocumentFileSink):
    """Writes each document's ALTO file, atomically."""

    def __init__(self, store: Store) -> None:
        super().__init__(store, alto_key, render_alto)
