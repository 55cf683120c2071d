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
- ``pdfa``: the file is written as PDF/A-2b (``pdfa``), even one without an OCR'd page; an
  encrypted input keeps its encryption and is written as without ``pdfa``, with a warning:
  PDF/A forbids encryption, and a protected file is never handed out unprotected.
- ``rotate_pages`` (OCRmyPDF's ``--rotate-pages``): an OCR'd page the engine turned to read
  it (``Page.rotation``) has its ``/Rotate`` turned by as much, so viewers show it upright.
  The text layer is drawn first, for the page as it was shown; it lies in user space, which
  ``/Rotate`` does not move, so it stays under the printed words.
- ``deskew`` (OCRmyPDF's ``--deskew``): an OCR'd page whose lines the engine measured
  askew (``Page.skew``) is shown straightened: its content is drawn turned back about the
  page's centre, and our text laid level where the words now show (``pdf_deskew``).
  Unlike OCRmyPDF, which redraws the image, no image is decoded: the scan's bytes stay
  as they were.
- A page that gets our text layer loses the invisible text it had (an earlier OCR's,
  ``pdf_hidden_text``), so no word comes out twice.

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
from dataclasses import dataclass

import pikepdf
from PIL import Image

from ocrflow.document.model import Page, page_from_result
from ocrflow.sinks.base import FinishedDocument, OriginalFile
from ocrflow.sinks.pdf_deskew import straighten
from ocrflow.sinks.pdf_glyphless_font import GlyphlessFont
from ocrflow.sinks.pdf_hidden_text import strip_invisible_text
from ocrflow.sinks.pdf_images import image_pages
from ocrflow.sinks.pdf_text_layer import add_text_layer, gets_text_layer
from ocrflow.sinks.pdfa import make_pdfa, pdfa_versions
from ocrflow.storage.local import Store
from ocrflow.storage.names import safe_relpath
from ocrflow.types import PageResult

log = logging.getLogger(__name__)


def pdf_key(rel: str) -> str:
    """Where a document's searchable PDF goes: ``pdf/<rel>.pdf``."""
    return f"pdf/{safe_relpath(rel)}.pdf"


@dataclass(frozen=True, slots=True)
class PdfOptions:
    """What OCRmyPDF's flags ask of the searchable PDF (see the module's docstring)."""

    pdfa: bool = False
    rotate_pages: bool = False
    deskew: bool = False


def searchable_pdf(
    original: OriginalFile,
    pages: tuple[PageResult, ...],
    *,
    pdfa: bool = False,
    rotate_pages: bool = False,
    deskew: bool = False,
    name: str | None = None,
) -> bytes:
    """The searchable PDF of the file ``original``, given the results of its pages;
    ``pdfa``, ``rotate_pages`` and ``deskew`` as the module's docstring says; ``name`` is
    what a warning calls the document (default: the file's path)."""
    return searchable_pdf_of(
        original,
        [page_from_result(r) for r in pages],
        PdfOptions(pdfa, rotate_pages, deskew),
        name=name,
    )


def searchable_pdf_of(
    original: OriginalFile,
    pages: Iterable[Page],
    options: PdfOptions = PdfOptions(),
    *,
    name: str | None = None,
) -> bytes:
    """The searchable PDF of the file ``original``, given its pages (document model)."""
    ocr = {p.number: p for p in pages if gets_text_layer(p)}
    if original.kind == "image":
        return _from_image(original.path, ocr, options)
    if not ocr and not options.pdfa:
        with open(original.path, "rb") as source:  # nothing to add: the input itself
            return source.read()
    return _from_pdf(original, ocr, options, name=name)


def _from_pdf(
    original: OriginalFile, ocr: dict[int, Page], options: PdfOptions, *, name: str | None
) -> bytes:
    pdfa = options.pdfa
    with pikepdf.open(original.path, password=original.password or "") as pdf:
        font = None
        for number, page in sorted(ocr.items()):
            if number > len(pdf.pages):
                continue
            font = font or GlyphlessFont(pdf)
            # An earlier OCR's invisible text goes first: else every word comes out twice.
            strip_invisible_text(pdf, pdf.pages[number - 1])
            _lay_text(pdf, pdf.pages[number - 1], page, font, options)
        if font is not None:
            font.finish()
        if pdfa and pdf.is_encrypted:
            log.warning(
                "%s is encrypted: its searchable PDF keeps the encryption and is not PDF/A "
                "(PDF/A forbids encryption)",
                name or original.path,
            )
            pdfa = False
        if font is None and not pdfa:  # nothing added after all: the input itself
            with open(original.path, "rb") as source:
                return source.read()
        return _saved(pdf, encrypted=pdf.is_encrypted, pdfa=pdfa)


def _from_image(path: str, ocr: dict[int, Page], options: PdfOptions) -> bytes:
    with pikepdf.new() as pdf:
        font = None
        for number, pdf_page in enumerate(image_pages(pdf, path), 1):
            page = ocr.get(number)
            if page is not None:
                font = font or GlyphlessFont(pdf)
                _lay_text(pdf, pdf_page, page, font, options)
        if font is not None:
            font.finish()
        return _saved(pdf, encrypted=False, pdfa=options.pdfa)


def _lay_text(
    pdf: pikepdf.Pdf, pdf_page: pikepdf.Page, page: Page, font: GlyphlessFont, options: PdfOptions
) -> None:
    """The text layer on an OCR'd page, the page straightened first and turned upright
    after, as asked."""
    if options.deskew:
        page = straighten(pdf, pdf_page, page) or page
    add_text_layer(pdf_page, page, font)
    if options.rotate_pages:
        turn_upright(pdf_page, page)


def turn_upright(pdf_page: pikepdf.Page, page: Page) -> None:
    """Turn ``pdf_page``'s ``/Rotate`` (its own or inherited) clockwise by the turn the
    engine gave the page to read it, so viewers show it as the engine read it. Call it
    after the text layer is drawn: that is placed for the page as it was shown."""
    turn = page.rotation % 360
    if turn and not turn % 90:
        pdf_page.rotate(turn, relative=True)


def _saved(pdf: pikepdf.Pdf, *, encrypted: bool, pdfa: bool = False) -> bytes:
    buffer = io.BytesIO()
    if encrypted:
        # Re-encrypted with the input's own keys; qpdf refuses raw streams and a
        # content-derived /ID here, and every stream's bytes change with encryption anyway.
        pdf.save(buffer, encryption=True, compress_streams=False)
        return buffer.getvalue()
    min_version = force_version = ""
    if pdfa:
        make_pdfa(pdf)
        min_version, force_version = pdfa_versions(pdf)
    pdf.save(
        buffer,
        # Every stream as it was: qpdf would otherwise re-encode streams with LZW or ASCII
        # filters and compress unfiltered ones (ours come compressed).
        stream_decode_level=pikepdf.StreamDecodeLevel.none,
        compress_streams=False,
        # Same input, same bytes.
        deterministic_id=True,
        min_version=min_version,
        force_version=force_version,
    )
    return buffer.getvalue()


class PdfSink:
    """Writes each document's searchable PDF, atomically."""

    def __init__(self, store: Store, options: PdfOptions = PdfOptions()) -> None:
        self.store = store
        self.options = options

    def write(self, document: FinishedDocument) -> None:
        """Write the searchable PDF of a document that produced text and whose original is
        at hand (see the module's docstring for what is skipped)."""
        original = document.original
        if not document.has_output or original is None:
            return
        try:
            pages = [page_from_result(r) for r in document.result.pages]
            data = searchable_pdf_of(original, pages, self.options, name=document.meta.rel)
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
