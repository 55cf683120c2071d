"""An earlier OCR's invisible text is taken off the pages we read again; what is painted and
every image stream stay as they were."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pikepdf
import pytest

from ocrflow.sinks.pdf_hidden_text import strip_invisible_text

CORPUS = Path(__file__).resolve().parents[3] / ".." / "shared" / "corpus"
CONTENT = b"""
BT /F1 12 Tf 3 Tr 72 700 Td (hidden) Tj ET
q BT /F1 12 Tf 0 Tr 72 650 Td (shown) Tj ET Q
BT /F1 12 Tf 14 TL 72 600 Td (after) ' ET
q 0 Tr Q
BT /F1 12 Tf 72 550 Td [(again)] TJ 0 Tr (visible) Tj ET
BT /F1 12 Tf 7 Tr 72 500 Td (clip) Tj ET
"""


def _text(path: Path) -> list[str]:
    return subprocess.run(
        ["pdftotext", str(path), "-"], capture_output=True, text=True, check=True
    ).stdout.split()


def _image_bytes(page: pikepdf.Page) -> dict[str, bytes]:
    xobjects = page.obj.Resources.get("/XObject", pikepdf.Dictionary())
    return {
        str(name): xobject.read_raw_bytes()
        for name, xobject in xobjects.items()
        if xobject.get("/Subtype") == "/Image"
    }


def _pdf_with_text(path: Path) -> Path:
    with pikepdf.new() as pdf:
        page = pdf.add_blank_page(page_size=(612, 792))
        font = pikepdf.Dictionary(Type=pikepdf.Name.Font, Subtype=pikepdf.Name.Type1)
        font.BaseFont = pikepdf.Name.Helvetica
        page.obj.Resources = pikepdf.Dictionary(Font=pikepdf.Dictionary(F1=font))
        page.obj.Contents = pdf.make_stream(CONTENT)
        pdf.save(path)
    return path


def test_only_invisible_text_goes(tmp_path: Path) -> None:
    source = _pdf_with_text(tmp_path / "in.pdf")
    before = " ".join(_text(source))
    assert all(word in before for word in ("hidden", "shown", "after", "again", "visible", "clip"))
    with pikepdf.open(source) as pdf:
        assert strip_invisible_text(pdf, pdf.pages[0]) == 4
        pdf.save(tmp_path / "out.pdf")
    # "after" is shown by ', which moves to the next line first: the move stays (T*).
    assert _text(tmp_path / "out.pdf") == ["shown", "visible"]
    with pikepdf.open(tmp_path / "out.pdf") as pdf:
        operators = [str(op) for _, op in pikepdf.parse_content_stream(pdf.pages[0])]
    assert operators.count("T*") == 1


def test_a_page_without_invisible_text_is_left_byte_for_byte(tmp_path: Path) -> None:
    source = tmp_path / "in.pdf"
    with pikepdf.new() as pdf:
        page = pdf.add_blank_page(page_size=(612, 792))
        page.obj.Contents = pdf.make_stream(b"0 g 10 10 100 100 re f")
        pdf.save(source)
    with pikepdf.open(source) as pdf:
        before = pdf.pages[0].obj.Contents.read_raw_bytes()
        assert strip_invisible_text(pdf, pdf.pages[0]) == 0
        assert pdf.pages[0].obj.Contents.read_raw_bytes() == before


@pytest.mark.parametrize("name", ["pikepdf__sandwich", "pdfjs__issue5747"])
def test_an_ocr_layer_of_a_real_scan_goes_and_its_images_stay(tmp_path: Path, name: str) -> None:
    source = CORPUS / "pdfs" / f"{name}.pdf"
    assert len(_text(source)) > 100
    with pikepdf.open(source) as pdf:
        images = _image_bytes(pdf.pages[0])
        assert strip_invisible_text(pdf, pdf.pages[0]) > 100
        pdf.save(tmp_path / "out.pdf")
    assert _text(tmp_path / "out.pdf") == []
    with pikepdf.open(tmp_path / "out.pdf") as out:
        assert _image_bytes(out.pages[0]) == images
    assert subprocess.run(["qpdf", "--check", str(tmp_path / "out.pdf")]).returncode == 0


def test_an_ocrmypdf_layer_in_a_form_goes(tmp_path: Path) -> None:
    # OCRmyPDF draws its text layer as a form XObject over the page.
    source = _pdf_with_text(tmp_path / "in.pdf")
    with pikepdf.open(source) as pdf:
        page = pdf.pages[0]
        form = pdf.make_stream(b"BT /F1 12 Tf 3 Tr 72 400 Td (formtext) Tj ET")
        form.Type, form.Subtype = pikepdf.Name.XObject, pikepdf.Name.Form
        form.BBox = [0, 0, 612, 792]
        form.Resources = page.obj.Resources
        page.obj.Resources.XObject = pikepdf.Dictionary(OCR=form)
        page.contents_add(pdf.make_stream(b"q /OCR Do Q"))
        pdf.save(tmp_path / "with_form.pdf")
    assert "formtext" in _text(tmp_path / "with_form.pdf")
    with pikepdf.open(tmp_path / "with_form.pdf") as pdf:
        assert strip_invisible_text(pdf, pdf.pages[0]) == 5
        pdf.save(tmp_path / "out.pdf")
    assert _text(tmp_path / "out.pdf") == ["shown", "visible"]
