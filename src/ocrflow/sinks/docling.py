"""One docling JSON file a document: ``docling/<input path relative to its root>.json``.

The file is a ``DoclingDocument`` (docling-core, the ``ocrflow[docling]`` extra), so the
docling tool chain (its Markdown and HTML exports, its chunkers) reads our conversions as
its own. ``docling_build`` maps the document model onto it; this module gives it the page
sizes and figure files and writes it.
"""

from __future__ import annotations

import json
import logging
import mimetypes
import struct
import threading
import warnings
from collections.abc import Mapping

from docling_core.types.doc import DoclingDocument
from PIL import Image

from ocrflow.document import Document, document_from_result
from ocrflow.errors import OcrflowError
from ocrflow.render.pdf import open_pdf
from ocrflow.sinks.base import FinishedDocument, figure_key
from ocrflow.sinks.docling_build import FigureFile, PageFrame, build_docling
from ocrflow.storage.local import Store
from ocrflow.storage.names import safe_relpath

log = logging.getLogger(__name__)

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: The EXIF orientation tag and its values that turn the image a quarter (so the rendered
#: page, upright per EXIF, has width and height swapped).
_ORIENTATION = 0x0112
_TURNED = frozenset((5, 6, 7, 8))
#: PDFium is not thread-safe and ``write`` runs in worker threads (``Outputs``).
_PDFIUM = threading.Lock()


def docling_key(rel: str) -> str:
    """Where a document's docling JSON goes: ``docling/<rel>.json``."""
    return f"docling/{safe_relpath(rel)}.json"


def docling_document(document: FinishedDocument, prefix: str = "") -> DoclingDocument:
    """The ``DoclingDocument`` of a finished document; figure image links lead from the
    file's folder to OUT by ``prefix``."""
    model = document_from_result(document.result, document.meta)  # placeholders kept
    name = document.meta.rel.rsplit("/", 1)[-1]
    return build_docling(
        model,
        name=name,
        frames=page_frames(document, model),
        figures=figure_files(document, prefix),
        mimetype=_mimetype(document, name),
    )


def page_frames(document: FinishedDocument, model: Document) -> dict[int, PageFrame]:
    """Each page's size as docling measures it: a PDF's pages in points, an image's in its
    own pixels (EXIF orientation applied), both as rendered, the frame our boxes are on.

    Without the original at hand (a later stage rewriting outputs), the size of the image
    the engine read stands in; pages with neither are left out (no provenance)."""
    numbers = [page.number for page in model.pages]
    frames = dict(_source_frames(document, numbers)) if document.original is not None else {}
    for page in model.pages:
        if page.number not in frames and page.size is not None:
            frames[page.number] = PageFrame(page.size.width, page.size.height)
    return frames


def _source_frames(document: FinishedDocument, numbers: list[int]) -> Mapping[int, PageFrame]:
    original = document.original
    assert original is not None
    try:
        if original.kind == "pdf":
            return _pdf_frames(original.path, original.password, numbers)
        return _image_frames(original.path, numbers)
    except (OcrflowError, OSError, ValueError, EOFError, Image.DecompressionBombError) as exc:
        # Sizes only place the boxes: the document is still written.
        log.warning("%s: page sizes for docling unknown: %s", document.doc_id, exc)
        return {}


def _pdf_frames(path: str, password: str | None, numbers: list[int]) -> dict[int, PageFrame]:
    frames = {}
    with _PDFIUM:
        pdf, _ = open_pdf(path, [password] if password else [])
        try:
            for number in numbers:
                if 1 <= number <= len(pdf):
                    # PDFium gives the size of the page as displayed (its /Rotate applied).
                    page = pdf[number - 1]
                    width, height = page.get_size()
                    page.close()
                    frames[number] = PageFrame(round(width, 2), round(height, 2))
        finally:
            pdf.close()
    return frames


def _image_frames(path: str, numbers: list[int]) -> dict[int, PageFrame]:
    frames = {}
    with warnings.catch_warnings():
        # Only the header is read, never the pixels: a huge image costs nothing here.
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        with Image.open(path) as image:
            for number in numbers:
                if 1 <= number <= getattr(image, "n_frames", 1):
                    image.seek(number - 1)
                    width, height = image.size
                    if image.getexif().get(_ORIENTATION, 1) in _TURNED:
                        width, height = height, width
                    frames[number] = PageFrame(width, height)
    return frames


def figure_files(document: FinishedDocument, prefix: str = "") -> dict[tuple[int, str], FigureFile]:
    """Each figure by page and placeholder, with its file's link and pixel size."""
    files = {}
    for page in document.result.pages:
        for figure in page.figures:
            uri = prefix + figure_key(document.doc_id, figure.page, figure.index)
            size = png_size(figure.png) if figure.png else None
            files[(page.page, figure.placeholder)] = FigureFile(figure, uri, size)
    return files


def png_size(data: bytes) -> tuple[int, int] | None:
    """Width and height from a PNG's header; ``None`` when it is not a PNG."""
    if len(data) < 24 or not data.startswith(_PNG_SIGNATURE) or data[12:16] != b"IHDR":
        return None
    width, height = struct.unpack(">II", data[16:24])
    return int(width), int(height)


def _mimetype(document: FinishedDocument, name: str) -> str:
    if document.original is not None and document.original.kind == "pdf":
        return "application/pdf"
    return mimetypes.guess_type(name)[0] or "application/octet-stream"


class DoclingSink:
    """Writes each document's docling JSON, atomically."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def write(self, document: FinishedDocument) -> None:
        """Write the docling JSON of a document that produced text (ok or partial)."""
        if not document.has_output:
            return
        key = docling_key(document.meta.rel)
        doc = docling_document(document, prefix="../" * key.count("/"))
        data = doc.export_to_dict()
        self.store.write_bytes(key, json.dumps(data, ensure_ascii=False).encode())

    def close(self) -> None:
        """Nothing buffered."""
