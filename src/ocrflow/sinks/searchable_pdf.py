"""Searchable PDFs: ``pdf/<input path relative to its root>.pdf``, the input with its text
under each word, invisible, as OCRmyPDF gives them.

- A PDF input keeps every page: a page an engine read gets an invisible text layer (see
  ``pdf_text_layer``); a page read from its own text layer, a blank page and a page
  outside ``--pages`` stay as they are. Nothing of the input is decoded or re-encoded:
  image and content streams keep their bytes (qpdf writes them back raw,
  ``stream_decode_level=none``); each OCR'd page only gains two small content streams and
  a font. A PDF without an OCR'd page is copied byte for byte.
- An encrypted PDF stays encrypted with its own passwords and permissions (qpdf's
  "preserve" encryption): the searchable copy is no easier to open than the input was.
- An image input becomes one page a frame at its own resolution (see ``pdf_images``).
- A document without its original at hand (``FinishedDocument.original`` is ``None``: a
  later stage rewriting outputs from the workspace) gets no PDF written, and an existing one
  is left alone: the text a later stage changes (figure descriptions) is not in the PDF.
- A PDF qpdf cannot read (PDFium, which converted it, is more lenient) gets no PDF; the
  error is logged and the run goes on.

Library, chosen by measurement (``bench/bench_pdf_sink.py --compare``; figures in
``docs/searchable-pdf.md``): pikepdf (qpdf). It appends streams to a page without parsing
or rewriting the page's own, writes untouched objects back raw, preserves encryption and
writes a deterministic file; on 50 scan pages it drew the text layer in about half the
time pypdfium2 took. pypdfium2 (already a dependency) also kept the images, but its text
objects take PDFium's standard fonts: Cyrillic and Chinese words came back as ``ÿÿÿ`` (a
Unicode layer would need a full font file per document, loaded through its ``cmap``).
fpdf2 only writes new PDFs, so it cannot keep an input's pages; OCRmyPDF's hOCR renderer
is pikepdf plus a one-page PDF per page grafted on: the same library with more steps.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Iterable

import pikepdf
from PIL import Image

from ocrflow.document.model import Page, page_from_result
from ocrflow.sinks.base import FinishedDocument, OriginalFile
from ocrflow.sinks.pdf_images import image_pages
from ocrflow.sinks.pdf_text_layer import GlyphlessFont, add_text_layer, gets_text_layer
from ocrflow.storage.local import Store
from ocrflow.storage.names import safe_relpath
from ocrflow.types import PageResult

log = logging.getLogger(__name__)


def pdf_key(rel: str) -> str:
    """Where a document's searchable PDF goes: ``pdf/<rel>.pdf``."""
    return f"pdf/{safe_relpath(rel)}.pdf"


def searchable_pdf(original: OriginalFile, pages: tuple[PageResult, ...]) -> bytes:
    """The searchable PDF of the file ``original``, given the results of its pages."""
    return searchable_pdf_of(original, [page_from_result(r) for r in pages])


def searchable_pdf_of(original: OriginalFile, pages: Iterable[Page]) -> bytes:
    """The searchable PDF of the file ``original``, given its pages (document model)."""
    ocr = {p.number: p for p in pages if gets_text_layer(p)}
    if original.kind == "image":
        return _from_image(original.path, ocr)
    if not ocr:
        with open(original.path, "rb") as source:  # nothing to add: the input itself
            return source.read()
    return _from_pdf(original, ocr)


def _from_pdf(original: OriginalFile, ocr: dict[int, Page]) -> bytes:
    with pikepdf.open(original.path, password=original.password or "") as pdf:
        font = None
        for number, page in sorted(ocr.items()):
            if number > len(pdf.pages):
                continue
            font = font or GlyphlessFont(pdf)
            add_text_layer(pdf.pages[number - 1], page, font)
        if font is not None:
            font.finish()
        return _saved(pdf, encrypted=pdf.is_encrypted)


def _from_image(path: str, ocr: dict[int, Page]) -> bytes:
    with pikepdf.new() as pdf:
        font = None
        for number, pdf_page in enumerate(image_pages(pdf, path), 1):
            page = ocr.get(number)
            if page is not None:
                font = font or GlyphlessFont(pdf)
                add_text_layer(pdf_page, page, font)
        if font is not None:
            font.finish()
        return _saved(pdf, encrypted=False)


def _saved(pdf: pikepdf.Pdf, *, encrypted: bool) -> bytes:
    buffer = io.BytesIO()
    if encrypted:
        # Re-encrypted with the input's own keys; qpdf refuses raw streams and a
        # content-derived /ID here, and every stream's bytes change with encryption anyway.
        pdf.save(buffer, encryption=True, compress_streams=False)
        return buffer.getvalue()
    pdf.save(
        buffer,
        # Every stream as it was: qpdf would otherwise re-encode streams with LZW or ASCII
        # filters and compress unfiltered ones (ours come compressed).
        stream_decode_level=pikepdf.StreamDecodeLevel.none,
        compress_streams=False,
        # Same input, same bytes.
        deterministic_id=True,
    )
    return buffer.getvalue()


class PdfSink:
    """Writes each document's searchable PDF, atomically."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def write(self, document: FinishedDocument) -> None:
        """Write the searchable PDF of a document that produced text and whose original is
        at hand (see the module's docstring for what is skipped)."""
        original = document.original
        if not document.has_output or original is None:
            return
        try:
            data = searchable_pdf(original, document.result.pages)
        except (
            pikepdf.PdfError,
            OSError,
            ValueError,
            EOFError,
            Image.DecompressionBombError,
        ) as exc:
            log.error("no searchable PDF for %s: %s", document.meta.rel, exc)
            return
        self.store.write_bytes(pdf_key(document.meta.rel), data)

    def close(self) -> None:
        """Nothing buffered."""
