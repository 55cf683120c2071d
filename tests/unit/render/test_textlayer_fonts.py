"""The text layer is the same whatever fonts the machine has installed.

PDFium on Linux measures glyphs of fonts a PDF does not embed with faces it finds in fixed
folders (``/usr/share/fonts`` and a few others; fontconfig plays no part), unless it is
started with its own list of folders. Each test here runs the extraction in a fresh Python
process whose PDFium sees only a folder the test made: empty (a machine without CJK fonts)
or holding a generated font that draws every Han character as a box (a machine with one).
So both cases run on any machine, whatever it has installed.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pypdfium2 as pdfium
import pytest
from PIL import ImageFont

from ocrflow.render.fontdeps import in_builtin_faces
from ocrflow.render.textlayer import extract_text_layer, score_text_layer
from tests.needs import CORPUS, need_corpus_file
from tests.pdfwords import pdf_from_objects
from tests.unit.render.synthfont import FAMILY, han_box_font

REPO = Path(__file__).resolve().parents[3]

# Run in the child: start PDFium again with only the given font folder, then extract.
_CHILD = """
import ctypes, json, sys
import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

folder, pdf_path, pages = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
# pypdfium2 started PDFium at import with the default folders; no font was looked up yet.
pdfium_c.FPDF_DestroyLibrary()
entry = ctypes.create_string_buffer(folder.encode())
paths = (ctypes.POINTER(ctypes.c_char) * 2)(ctypes.cast(entry, ctypes.POINTER(ctypes.c_char)))
config = pdfium_c.FPDF_LIBRARY_CONFIG(
    version=2,
    m_pUserFontPaths=ctypes.cast(paths, ctypes.POINTER(ctypes.POINTER(ctypes.c_char))),
    m_pIsolate=None,
    m_v8EmbedderSlot=0,
)
pdfium_c.FPDF_InitLibraryWithConfig(config)

from ocrflow.render.textlayer import extract_text_layer, score_text_layer

doc = pdfium.PdfDocument(pdf_path)
out = []
for number in pages:
    page = doc[number - 1]
    textpage = page.get_textpage()
    raw = textpage.get_text_range()
    textpage.close()
    layer = extract_text_layer(page)
    quality = score_text_layer(layer)
    out.append({"raw": raw, "text": layer.text, "chars": layer.char_count,
                "ok": quality.ok, "score": quality.score, "reasons": list(quality.reasons)})
    page.close()
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def font_folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two font folders for PDFium: none at all, and one CJK font (Han glyphs only)."""
    root = tmp_path_factory.mktemp("fonts")
    (root / "none").mkdir()
    (root / "cjk").mkdir()
    (root / "cjk" / "ocrflow-test-han.ttf").write_bytes(han_box_font())
    return {"none": root / "none", "cjk": root / "cjk"}


def _extract_with_fonts(folder: Path, pdf: Path, pages: list[int]) -> list[dict]:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(folder), str(pdf), json.dumps(pages)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _show(font: bytes, text: str, x: float, y: float) -> bytes:
    """One text object drawing ``text`` (UCS-2 codes of a UniGB-UCS2-H font)."""
    codes = text.encode("utf-16-be").hex().encode()
    return b"BT /%s 12 Tf %g %g Td <%s> Tj ET\n" % (font, x, y, codes)


def _scan_like_pdf() -> bytes:
    """A page like another program's OCR of a Chinese scan: one character an object, in a
    SimSun the PDF does not embed and without a ToUnicode map; plus a line drawn as one
    object, and lone Latin characters in non-embedded Helvetica."""
    lone = "截至2015年末，公司针对神鹰集团的担保取得的反抵押资产"
    content = b"".join(_show(b"F1", ch, 40 + 14 * i, 700) for i, ch in enumerate(lone))
    content += _show(b"F1", "三四五六七八九十", 40, 660)
    for i, letter in enumerate((b"O", b"k")):
        content += b"BT /F2 12 Tf %d 620 Td (%s) Tj ET\n" % (40 + 10 * i, letter)
    simsun = (
        b"<< /Type /Font /Subtype /CIDFontType2 /BaseFont /SimSun /DW 1000 "
        b"/CIDSystemInfo << /Registry (Adobe) /Ordering (GB1) /Supplement 2 >> "
        b"/FontDescriptor 7 0 R >>"
    )
    return pdf_from_objects(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            b"/Resources << /Font << /F1 5 0 R /F2 8 0 R >> >> /Contents 4 0 R >>",
            b"<< /Length %d >>\nstream\n%s\nendstream" % (len(content), content),
            b"<< /Type /Font /Subtype /Type0 /BaseFont /SimSun /Encoding /UniGB-UCS2-H "
            b"/DescendantFonts [6 0 R] >>",
            simsun,
            b"<< /Type /FontDescriptor /FontName /SimSun /Flags 32 /FontBBox [-8 -145 1000 859] "
            b"/ItalicAngle 0 /Ascent 859 /Descent -141 /CapHeight 684 /StemV 88 >>",
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
        ]
    )


def test_the_generated_font_is_a_cjk_font_pdfium_can_pick() -> None:
    font = ImageFont.truetype(io.BytesIO(han_box_font()), 40)
    assert font.getname()[0] == FAMILY
    inked = font.getmask("年").getbbox()
    assert inked is not None and inked[2] - inked[0] > 20  # a box, not an empty glyph
    assert font.getmask("A").getbbox() is None  # no Latin glyphs


def test_the_text_layer_is_the_same_with_and_without_a_cjk_font(
    font_folders: dict[str, Path], tmp_path: Path
) -> None:
    pdf = tmp_path / "layer.pdf"
    pdf.write_bytes(_scan_like_pdf())
    without, with_cjk = (_extract_with_fonts(font_folders[k], pdf, [1])[0] for k in ("none", "cjk"))
    # PDFium itself reads the page differently on the two machines: the lone Han
    # characters only where a CJK face exists, the lone "2" of SimSun only where none does.
    assert "截至" not in without["raw"] and "截至" in with_cjk["raw"]
    assert "2015" in without["raw"] and "2015" not in with_cjk["raw"]
    # The text layer is the same on both: lone characters of the font that needs a system
    # face are left out everywhere; the line drawn as one object and Helvetica stay.
    assert without["text"].split() == with_cjk["text"].split()
    assert "三四五六七八九十" in without["text"].split()
    assert "O" in without["text"] and "k" in without["text"]
    assert "截" not in without["text"] and "2015" not in without["text"]
    assert (without["ok"], without["score"]) == (with_cjk["ok"], with_cjk["score"])


def test_this_machine_reads_it_as_both_do(font_folders: dict[str, Path], tmp_path: Path) -> None:
    pdf = tmp_path / "layer.pdf"
    pdf.write_bytes(_scan_like_pdf())
    expected = _extract_with_fonts(font_folders["none"], pdf, [1])[0]["text"]
    doc = pdfium.PdfDocument(pdf)
    try:
        layer = extract_text_layer(doc[0])
    finally:
        doc.close()
    assert layer.text.split() == expected.split()


def test_the_chinese_ocr_layer_goes_to_ocr_with_and_without_a_cjk_font(
    font_folders: dict[str, Path],
) -> None:
    """``pdfplumber__pr-136-example.pdf``: a Chinese scan under EPSON Scan's OCR layer, one
    character an object in a non-embedded SimSun-GBK-EUC-H. Measured on page 2 against a
    hand-checked transcription: the layer read where a CJK font is installed has a CER of
    0.038 on the body text (诸暨 misread five ways, 20I5, 2016-lo-28), the embedded engine's
    OCR 0.000; so OCR is the right route, on every machine."""
    pdf = CORPUS / "pdfs" / "pdfplumber__pr-136-example.pdf"
    need_corpus_file(pdf)
    pages = [1, 2, 3, 4, 5, 6]
    without, with_cjk = (_extract_with_fonts(font_folders[k], pdf, pages) for k in ("none", "cjk"))
    assert len(with_cjk[1]["raw"]) > 2 * len(without[1]["raw"])  # PDFium alone differs
    for page_without, page_with in zip(without, with_cjk, strict=True):
        assert not page_without["ok"] and not page_with["ok"]
        assert "ocr_layer_over_scan" in page_with["reasons"]
        assert page_without["chars"] == page_with["chars"]
        assert abs(page_without["score"] - page_with["score"]) <= 0.002
    quality = score_text_layer(_corpus_page(pdf, 2))
    assert not quality.ok and "ocr_layer_over_scan" in quality.reasons


def _corpus_page(pdf: Path, number: int) -> object:
    doc = pdfium.PdfDocument(pdf)
    try:
        return extract_text_layer(doc[number - 1])
    finally:
        doc.close()


@pytest.mark.parametrize(
    ("char", "drawn"),
    [("A", True), ("é", True), ("€", True), ("Ł", True), ("−", True), ("年", False), ("α", False)],
)
def test_the_built_in_repertoire(char: str, drawn: bool) -> None:
    assert in_builtin_faces(char) is drawn
