"""Our document model as a ``DoclingDocument`` (docling-core), block by block.

Labels map one to one where docling has the same one; headings lose their ``#`` marks
(the count gives the level), list items their markers (consecutive items share a list
group), tables become ``TableData`` cells, figures pictures captioned by the caption block
that follows them or by their description. Page headers and footers go to the furniture
layer, so docling's body (and its Markdown) holds the running text only. Boxes become
provenance in the page's units as ``frames`` give them (``sinks.docling``: PDF points or
image pixels, as docling measures pages), origin top left.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from docling_core.types.doc import (
    BoundingBox,
    ContentLayer,
    CoordOrigin,
    DocItemLabel,
    DoclingDocument,
    DocumentOrigin,
    FloatingItem,
    GroupItem,
    ImageRef,
    ProvenanceItem,
    Size,
    TableCell,
    TableData,
)

from ocrflow.document import Document, Page, blocks_from_markdown
from ocrflow.sinks.docling_tables import parse_table
from ocrflow.types import BBox, Block, BlockLabel, Figure

_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+")
_LIST_MARKER = re.compile(r"^\s*(?:([-*+])|(\d{1,9})[.)])\s+")
_FENCE = re.compile(r"^\s*(```|~~~)[^\n]*\n?|\n?\s*(```|~~~)\s*$")
_PLACEHOLDER = re.compile(r"<!--figure:\d+-->")
_IMAGE_ALT = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_FORMULA = re.compile(r"^\s*(\$\$|\\\[)|(\$\$|\\\])\s*$")
_TEXT_LABELS: Mapping[BlockLabel, DocItemLabel] = {
    BlockLabel.TEXT: DocItemLabel.TEXT,
    BlockLabel.CAPTION: DocItemLabel.CAPTION,
    BlockLabel.FOOTNOTE: DocItemLabel.FOOTNOTE,
    BlockLabel.PAGE_HEADER: DocItemLabel.PAGE_HEADER,
    BlockLabel.PAGE_FOOTER: DocItemLabel.PAGE_FOOTER,
}
_FURNITURE = frozenset((BlockLabel.PAGE_HEADER, BlockLabel.PAGE_FOOTER))


@dataclass(frozen=True, slots=True)
class PageFrame:
    """A page's size in the units its provenance boxes use (pixels or points)."""

    width: float
    height: float


@dataclass(frozen=True, slots=True)
class FigureFile:
    """A figure and where its PNG lies, relative to the docling file (``None``: no link)."""

    figure: Figure
    uri: str | None = None
    size: tuple[int, int] | None = None


def build_docling(
    document: Document,
    *,
    name: str,
    frames: Mapping[int, PageFrame],
    figures: Mapping[tuple[int, str], FigureFile] | None = None,
    mimetype: str = "application/octet-stream",
) -> DoclingDocument:
    """The ``DoclingDocument`` of ``document`` (built with its figure placeholders left in).

    ``frames`` gives the size of each page number that has one (pages without one get no
    provenance); ``figures`` maps a page number and placeholder to the figure and its file.
    """
    doc = DoclingDocument(name=name, origin=_origin(document, name, mimetype))
    builder = _Builder(doc, figures or {})
    for page in document.pages:
        frame = frames.get(page.number)
        if frame is not None:
            doc.add_page(page_no=page.number, size=Size(width=frame.width, height=frame.height))
        builder.page(page, frame)
    builder.finish()
    return doc


def _origin(document: Document, name: str, mimetype: str) -> DocumentOrigin | None:
    digest = str(document.metadata.get("content_sha256") or "")
    if not re.fullmatch(r"[0-9a-f]{16,}", digest):
        return None
    # docling keys a source by a 64-bit hash: the first 16 hex digits of our SHA-256.
    return DocumentOrigin(mimetype=mimetype, binary_hash=int(digest[:16], 16), filename=name)


class _Builder:
    """Adds one page's blocks at a time; remembers the open list and the last table or
    picture, which a caption block right after it belongs to."""

    def __init__(self, doc: DoclingDocument, figures: Mapping[tuple[int, str], FigureFile]):
        self.doc = doc
        self.figures = figures
        self.list_group: GroupItem | None = None
        #: The last table or picture and the description to caption it with when no
        #: caption block follows.
        self.open: tuple[FloatingItem, str | None] | None = None

    def page(self, page: Page, frame: PageFrame | None) -> None:
        blocks = _captions_after_tables(page.blocks or blocks_from_markdown(page.markdown))
        for block in blocks:
            inline = [] if block.label is BlockLabel.FIGURE else _PLACEHOLDER.findall(block.text)
            if inline:  # figures inside running text: the text, then each figure
                block = dataclasses.replace(block, text=_PLACEHOLDER.sub(" ", block.text))
            if block.text.strip() or block.label is BlockLabel.FIGURE:
                self.block(block, page.number, frame)
            for placeholder in inline:
                self.block(Block(BlockLabel.FIGURE, placeholder), page.number, frame)

    def finish(self) -> None:
        """Caption the last open picture by its description (no caption block came)."""
        if self.open is not None:
            item, description = self.open
            self.open = None
            if description:
                self._caption(item, description, None)

    def block(self, block: Block, page_no: int, frame: PageFrame | None) -> None:
        label = block.label
        if label is not BlockLabel.LIST_ITEM:
            self.list_group = None
        if label is BlockLabel.CAPTION and self.open is not None:
            item, self.open = self.open[0], None
            self._caption(item, block.text, _prov(page_no, block.bbox, frame, _flat(block.text)))
            return
        self.finish()
        if label is BlockLabel.TITLE:
            text = _flat(_HEADING.sub("", block.text, count=1))
            self.doc.add_title(text, orig=block.text, prov=_prov(page_no, block.bbox, frame, text))
        elif label is BlockLabel.SECTION_HEADER:
            self._heading(block, page_no, frame)
        elif label is BlockLabel.LIST_ITEM:
            self._list_item(block, page_no, frame)
        elif label is BlockLabel.TABLE:
            self._table(block, page_no, frame)
        elif label is BlockLabel.FIGURE:
            self._figure(block, page_no, frame)
        elif label is BlockLabel.FORMULA:
            text = _FORMULA.sub("", block.text.strip()).strip()
            self.doc.add_formula(
                text, orig=block.text, prov=_prov(page_no, block.bbox, frame, text)
            )
        elif label is BlockLabel.CODE:
            text = _FENCE.sub("", block.text.strip())
            self.doc.add_code(text, orig=block.text, prov=_prov(page_no, block.bbox, frame, text))
        else:
            self._text(block, page_no, frame)

    def _text(self, block: Block, page_no: int, frame: PageFrame | None) -> None:
        text = _flat(block.text)
        self.doc.add_text(
            _TEXT_LABELS.get(block.label, DocItemLabel.TEXT),
            text,
            orig=block.text,
            prov=_prov(page_no, block.bbox, frame, text),
            content_layer=ContentLayer.FURNITURE if block.label in _FURNITURE else None,
        )

    def _heading(self, block: Block, page_no: int, frame: PageFrame | None) -> None:
        marks = _HEADING.match(block.text)
        # Markdown "##" is docling's level 1 (docling writes a level-n header as n+1 "#").
        level = max(1, len(marks.group(1)) - 1) if marks else 1
        text = _flat(_HEADING.sub("", block.text, count=1))
        prov = _prov(page_no, block.bbox, frame, text)
        self.doc.add_heading(text, orig=block.text, level=level, prov=prov)

    def _list_item(self, block: Block, page_no: int, frame: PageFrame | None) -> None:
        marker = _LIST_MARKER.match(block.text)
        enumerated = bool(marker and marker.group(2))
        if self.list_group is None:
            self.list_group = self.doc.add_list_group()
        text = _flat(_LIST_MARKER.sub("", block.text, count=1))
        self.doc.add_list_item(
            text,
            enumerated=enumerated,
            marker=marker.group(0).strip() if marker else None,
            orig=block.text,
            prov=_prov(page_no, block.bbox, frame, text),
            parent=self.list_group,
        )

    def _table(self, block: Block, page_no: int, frame: PageFrame | None) -> None:
        grid = parse_table(block.text)
        if grid is None:  # not a table after all: keep its words
            self._text(block, page_no, frame)
            return
        cells = [
            TableCell(
                text=c.text,
                row_span=c.row_span,
                col_span=c.col_span,
                start_row_offset_idx=c.row,
                end_row_offset_idx=c.row + c.row_span,
                start_col_offset_idx=c.col,
                end_col_offset_idx=c.col + c.col_span,
                column_header=c.header,
            )
            for c in grid.cells
        ]
        data = TableData(table_cells=cells, num_rows=grid.rows, num_cols=grid.cols)
        prov = _prov(page_no, block.bbox, frame, block.text)
        self.open = (self.doc.add_table(data, prov=prov), None)

    def _figure(self, block: Block, page_no: int, frame: PageFrame | None) -> None:
        found = next(
            (f for (n, p), f in self.figures.items() if n == page_no and p in block.text), None
        )
        image = None
        if found is not None and found.uri and found.size:
            width, height = found.size
            size = Size(width=width, height=height)
            image = ImageRef(mimetype="image/png", dpi=72, size=size, uri=found.uri)
        picture = self.doc.add_picture(image=image, prov=_prov(page_no, block.bbox, frame, ""))
        if found is not None:
            description = found.figure.description
        else:  # an engine's own image link: its alt text is all there is
            description = " ".join(_IMAGE_ALT.findall(block.text))
        self.open = (picture, description.strip() if description else None)

    def _caption(self, item: FloatingItem, text: str, prov: ProvenanceItem | None) -> None:
        caption = self.doc.add_text(
            DocItemLabel.CAPTION, _flat(text), orig=text, prov=prov, parent=item
        )
        item.captions.append(caption.get_ref())


def _captions_after_tables(blocks: Sequence[Block]) -> list[Block]:
    """The blocks with a caption printed above a table moved after it, where the builder
    attaches captions (not when a figure or table before it may own the caption)."""
    ordered = list(blocks)
    owners = (BlockLabel.FIGURE, BlockLabel.TABLE)
    for i in range(len(ordered) - 1):
        caption, table = ordered[i], ordered[i + 1]
        if (
            caption.label is BlockLabel.CAPTION
            and table.label is BlockLabel.TABLE
            and (i == 0 or ordered[i - 1].label not in owners)
        ):
            ordered[i], ordered[i + 1] = table, caption
    return ordered


def _prov(
    page_no: int, box: BBox | None, frame: PageFrame | None, text: str
) -> ProvenanceItem | None:
    if box is None or frame is None:
        return None
    x0, y0, x1, y1 = box
    bbox = BoundingBox(
        l=x0 * frame.width,
        t=y0 * frame.height,
        r=x1 * frame.width,
        b=y1 * frame.height,
        coord_origin=CoordOrigin.TOPLEFT,
    )
    return ProvenanceItem(page_no=page_no, bbox=bbox, charspan=(0, len(text)))


def _flat(text: str) -> str:
    """Running text on one line, as docling holds a paragraph."""
    return " ".join(text.split())
