"""The searchable-PDF sink's cost, per page and against the JSONL sink in the same run.

    .venv/bin/python bench/bench_pdf_sink.py [--book-pages 300] [--scan-pages 50] [--compare]

Documents (made here, nothing downloaded):

- a born-digital book: ``--book-pages`` pages of Courier text, 40 lines a page, written
  as a plain PDF. Timed twice: as the pipeline routes it (every page read from its text
  layer: the sink copies the file) and as under ``--text-layer off`` (every page OCR'd:
  a text layer drawn from the lines' boxes).
- a scan: one corpus page (``pdfs/docling__ocr_test.pdf``, rendered at 200 dpi by PDFium,
  stored as JPEG) repeated ``--scan-pages`` times in one image PDF, each page OCR'd with
  the lines of ``groundtruth/ocrmypdf__linn.txt`` spread over it; and the same page as a
  JPEG image input (one page).

For each: the PDF sink's and the JSONL sink's milliseconds a page (median of 3 runs) and
their ratio; the output's size. ``--compare`` also draws the scan's text layer with
pypdfium2 (text objects + ``FPDFPage_GenerateContent``) and reports its time, and whether
the page images and content streams came through byte for byte, beside ours (pikepdf).
"""

from __future__ import annotations

import argparse
import ctypes
import io
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pikepdf
import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from ocrflow.document.model import page_from_result
from ocrflow.document.words import block_lines, line_words
from ocrflow.sinks.base import DocumentMeta, FinishedDocument, OriginalFile
from ocrflow.sinks.jsonl import JsonlSink
from ocrflow.sinks.searchable_pdf import PdfSink, searchable_pdf
from ocrflow.storage.local import LocalStore
from ocrflow.types import Block, BlockLabel, DocStatus, DocumentResult, Line, PageResult, Route

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"
LINES_A_PAGE = 40


def book_pdf(path: Path, pages: int) -> list[list[str]]:
    """A born-digital book of ``pages`` Courier pages; returns each page's lines."""
    words = "the reading room received four hundred boxes of letters invoices and contracts"
    words = words.split()
    texts = []
    pdf = pikepdf.new()
    font = pdf.make_indirect(
        pikepdf.Dictionary(
            Type=pikepdf.Name.Font, Subtype=pikepdf.Name.Type1, BaseFont=pikepdf.Name.Courier
        )
    )
    for number in range(pages):
        lines = [
            " ".join(words[(number + row + i) % len(words)] for i in range(9))
            for row in range(LINES_A_PAGE)
        ]
        ops = [
            f"BT /F1 10 Tf 1 0 0 1 72 {740 - 16 * row} Tm ({line}) Tj ET"
            for row, line in enumerate(lines)
        ]
        page = pikepdf.Dictionary(
            Type=pikepdf.Name.Page,
            MediaBox=pikepdf.Array([0, 0, 612, 792]),
            Resources=pikepdf.Dictionary(Font=pikepdf.Dictionary(F1=font)),
            Contents=pdf.make_indirect(pikepdf.Stream(pdf, "\n".join(ops).encode())),
        )
        pdf.pages.append(pikepdf.Page(page))
        texts.append(lines)
    pdf.save(path, compress_streams=True)
    return texts


def scan_pdf(path: Path, jpeg_path: Path, pages: int) -> None:
    """``pages`` copies of one corpus scan page, each its own JPEG image (200 dpi)."""
    document = pdfium.PdfDocument(str(CORPUS / "pdfs" / "docling__ocr_test.pdf"))
    image = document[0].render(scale=200 / 72).to_pil().convert("L")
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=85, dpi=(200, 200))
    jpeg_path.write_bytes(buffer.getvalue())
    pdf = pikepdf.new()
    for _ in range(pages):
        stream = pikepdf.Stream(
            pdf, buffer.getvalue(),
            Type=pikepdf.Name.XObject, Subtype=pikepdf.Name.Image, Width=image.width,
            Height=image.height, ColorSpace=pikepdf.Name.DeviceGray, BitsPerComponent=8,
            Filter=pikepdf.Name.DCTDecode,
        )  # fmt: skip
        width, height = image.width * 72 / 200, image.height * 72 / 200
        content = f"q {width:.2f} 0 0 {height:.2f} 0 0 cm /Im0 Do Q".encode()
        page = pikepdf.Dictionary(
            Type=pikepdf.Name.Page,
            MediaBox=pikepdf.Array([0, 0, width, height]),
            Resources=pikepdf.Dictionary(XObject=pikepdf.Dictionary(Im0=stream)),
            Contents=pdf.make_indirect(pikepdf.Stream(pdf, content)),
        )
        pdf.pages.append(pikepdf.Page(page))
    pdf.save(path)


def ocr_page(number: int, lines: list[str], top: float = 0.08, step: float = 0.02) -> PageResult:
    """An OCR'd page: one block, ``lines`` stacked from ``top`` with line boxes."""
    boxed = tuple(
        Line(t, (0.1, top + i * step, 0.9, top + (i + 0.8) * step), 0.9)
        for i, t in enumerate(lines)
    )
    block = Block(
        BlockLabel.TEXT, "\n".join(lines), (0.1, top, 0.9, top + len(lines) * step), 0.9, boxed
    )
    return PageResult(number, "\n".join(lines), Route.ENGINE, blocks=(block,))


def document(rel: str, pages: list[PageResult], original: OriginalFile) -> FinishedDocument:
    result = DocumentResult("b" * 24, rel, DocStatus.OK, tuple(pages), len(pages))
    return FinishedDocument(result, DocumentMeta(rel, "0" * 64, None, "bench", "fp"), original)


def timed(write: Callable[[], None], runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        write()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def measure(name: str, finished: FinishedDocument, out: Path) -> None:
    store = LocalStore(out)
    pdf_s = timed(lambda: PdfSink(store).write(finished))
    jsonl = JsonlSink(store)
    jsonl_s = timed(lambda: jsonl.write(finished))
    jsonl.close()
    pages = len(finished.result.pages)
    size = sum(p.stat().st_size for p in (out / "pdf").rglob(f"{finished.meta.rel}.pdf"))
    print(
        f"{name:<44} {pages:>4} pages  pdf {1000 * pdf_s / pages:8.2f} ms/page  "
        f"jsonl {1000 * jsonl_s / pages:6.2f} ms/page  ratio {pdf_s / jsonl_s:7.1f}x  "
        f"out {size / 1e6:6.2f} MB"
    )


def pdfium_text_layer(source: Path, pages: list[PageResult]) -> bytes:
    """The text layer drawn with PDFium's page-object API (invisible Helvetica words
    scaled to their boxes), saved by PDFium."""
    doc = pdfium.PdfDocument(str(source))
    font = pdfium_c.FPDFText_LoadStandardFont(doc.raw, b"Helvetica")
    for result in pages:
        page = doc[result.page - 1]
        width, height = page.get_size()
        for block in page_from_result(result).blocks:
            for line in block_lines(block):
                for word in line_words(line):
                    if word.bbox is None:
                        continue
                    x0, y0, x1, y1 = word.bbox
                    size = (y1 - y0) * height
                    obj = pdfium_c.FPDFPageObj_NewTextObj(
                        doc.raw, b"Helvetica", ctypes.c_float(size)
                    )
                    utf16 = (word.text + "\0").encode("utf-16-le")
                    buffer = ctypes.create_string_buffer(utf16, len(utf16))
                    pdfium_c.FPDFText_SetText(
                        obj, ctypes.cast(buffer, ctypes.POINTER(pdfium_c.FPDF_WCHAR))
                    )
                    pdfium_c.FPDFTextObj_SetTextRenderMode(
                        obj, pdfium_c.FPDF_TEXTRENDERMODE_INVISIBLE
                    )
                    natural = 0.5 * size * len(word.text)  # Helvetica's advance is near 0.5 em
                    scale = (x1 - x0) * width / natural
                    pdfium_c.FPDFPageObj_Transform(
                        obj, scale, 0, 0, 1, x0 * width, (1 - y1) * height + 0.2 * size
                    )
                    pdfium_c.FPDFPage_InsertObject(page.raw, obj)
        pdfium_c.FPDFPage_GenerateContent(page.raw)
        page.close()
    del font  # owned by the document
    out = io.BytesIO()
    doc.save(out)
    doc.close()
    return out.getvalue()


def kept_bytes(source: Path, output: bytes) -> tuple[bool, bool]:
    """Whether every page's image stream, and its own content stream, came through as is."""
    images = contents = True
    with pikepdf.open(source) as before, pikepdf.open(io.BytesIO(output)) as after:
        for old, new in zip(before.pages, after.pages, strict=True):
            old_image = old.Resources.XObject.Im0.read_raw_bytes()
            new_images = [x.read_raw_bytes() for x in new.Resources.XObject.values()]
            images &= old_image in new_images
            own = old.obj.Contents.read_raw_bytes()
            streams = (
                new.obj.Contents
                if isinstance(new.obj.Contents, pikepdf.Array)
                else [new.obj.Contents]
            )
            contents &= any(s.read_raw_bytes() == own for s in streams)
    return images, contents


def scripts_kept(scan: Path, draw: Callable[[Path, list[PageResult]], bytes]) -> bool:
    """Whether Cyrillic and Chinese words drawn on the scan's first page read back (PDFium's
    text extraction) as they were written."""
    words = ["Привет", "мир", "中文", "文本", "plain"]
    page = ocr_page(1, [" ".join(words[:2]), " ".join(words[2:4]), words[4]])
    text = pdfium.PdfDocument(draw(scan, [page]))[0].get_textpage().get_text_range()
    return sorted(text.split()) == sorted(words)  # PDFium orders lines its own way


def pikepdf_text_layer(source: Path, pages: list[PageResult]) -> bytes:
    """Ours: the PDF sink's own function."""
    return searchable_pdf(OriginalFile(str(source), "pdf"), tuple(pages))


def compare(scan: Path, pages: list[PageResult]) -> None:
    """Time both libraries on the same pages; say what each kept."""
    for name, draw in (("pikepdf (ours)", pikepdf_text_layer), ("pypdfium2", pdfium_text_layer)):
        outputs: list[bytes] = []
        seconds = timed(lambda draw=draw, outputs=outputs: outputs.append(draw(scan, pages)))
        images, contents = kept_bytes(scan, outputs[-1])
        print(
            f"  {name:<16} {1000 * seconds / len(pages):7.2f} ms/page  images kept: {images}  "
            f"own content kept: {contents}  Cyrillic+CJK kept: {scripts_kept(scan, draw)}  "
            f"out {len(outputs[-1]) / 1e6:.2f} MB"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--book-pages", type=int, default=300)
    parser.add_argument("--scan-pages", type=int, default=50)
    parser.add_argument("--compare", action="store_true", help="also time pypdfium2's way")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        book = root / "book.pdf"
        lines = book_pdf(book, args.book_pages)
        out = root / "out"
        routed = [PageResult(n, "\n".join(t), Route.TEXT_LAYER) for n, t in enumerate(lines, 1)]
        measure(
            "born-digital book, text-layer route",
            document("book.pdf", routed, OriginalFile(str(book), "pdf")),
            out,
        )
        ocred = [ocr_page(n, t, top=0.06, step=0.0202) for n, t in enumerate(lines, 1)]
        measure(
            "born-digital book, all pages OCR'd",
            document("book-ocr.pdf", ocred, OriginalFile(str(book), "pdf")),
            out,
        )
        scan, jpeg = root / "scan.pdf", root / "scan.jpg"
        scan_pdf(scan, jpeg, args.scan_pages)
        text = [
            line
            for line in (CORPUS / "groundtruth" / "ocrmypdf__linn.txt").read_text().splitlines()
            if line.strip()
        ]
        page_lines = text[:LINES_A_PAGE]
        scanned = [ocr_page(n, page_lines) for n in range(1, args.scan_pages + 1)]
        words = sum(
            len(line_words(line)) for p in scanned[:1] for b in p.blocks for line in b.lines
        )
        measure(
            f"scan, image PDF ({words} words a page)",
            document("scan.pdf", scanned, OriginalFile(str(scan), "pdf")),
            out,
        )
        measure(
            "scan, JPEG image input",
            document("scan.jpg", scanned[:1], OriginalFile(str(jpeg), "image")),
            out,
        )
        if args.compare:
            print(f"library comparison on the {args.scan_pages}-page scan (median of 3):")
            compare(scan, scanned)


if __name__ == "__main__":
    main()
