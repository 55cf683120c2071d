"""``--pdfa`` and ``--rotate-pages`` on generated files.

PDF/A-2b is checked with what is at hand (no veraPDF here): ``qpdf --check``, the XMP
``pdfaid`` fields and the output intent as pikepdf reads them back, the header, the trailer
``/ID``, the glyph map, and the input's image streams byte for byte. Rotation is checked by
rendering the output page (PDFium) against the upright page it should show, and by
``pdftotext`` finding the words over the printed ones, in reading order.
"""

from __future__ import annotations

import io
import logging
import re
import subprocess
import zlib
from pathlib import Path

import pikepdf
import pypdfium2 as pdfium
import pytest
from PIL import Image, ImageChops, ImageCms, ImageDraw, ImageFont, ImageStat

from ocrflow.sinks.base import OriginalFile
from ocrflow.sinks.searchable_pdf import searchable_pdf
from ocrflow.types import BBox, PageResult, Route, unturn_box
from tests.unit.sinks.test_searchable_pdf import (
    assert_words_at,
    engine_page,
    found_words,
    locked_scan_pdf,
    scan_pdf,
)

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
LINES = ("Quarterly revenue rose", "while costs fell", "by twelve percent")


def qpdf_check(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["qpdf", "--check", str(path)], capture_output=True, text=True)


def image_streams(pdf: pikepdf.Pdf) -> list[bytes]:
    return [
        image.read_raw_bytes()
        for page in pdf.pages
        for image in page.Resources.get("/XObject", {}).values()
        if image.get("/Subtype") == "/Image"
    ]


def assert_pdfa_2b(path: Path) -> None:
    """What can be verified here of a PDF/A-2b file (see the module's docstring)."""
    done = qpdf_check(path)
    assert done.returncode == 0 and "WARNING" not in done.stdout + done.stderr, done
    data = path.read_bytes()
    # 6.1.2: %PDF-1.n (n <= 7), then a comment of four bytes above 127.
    assert re.match(rb"%PDF-1\.[4-7]\r?\n%[\x80-\xff]{4}", data), data[:20]
    with pikepdf.open(path) as pdf:
        assert not pdf.is_encrypted
        assert len(pdf.trailer.ID) == 2 and len(bytes(pdf.trailer.ID[0])) == 16
        meta = pdf.open_metadata()
        assert meta.pdfa_status == "2B"
        assert (meta["pdfaid:part"], meta["pdfaid:conformance"]) == ("2", "B")
        xmp = pdf.Root.Metadata
        assert xmp.Type == "/Metadata" and xmp.Subtype == "/XML" and "/Filter" not in xmp
        packet = xmp.read_bytes()
        assert b"<?xpacket begin=" in packet and b" bytes=" not in packet
        assert b" encoding=" not in packet.split(b"?>")[0]
        (intent,) = pdf.Root.OutputIntents
        assert intent.Type == "/OutputIntent" and intent.S == "/GTS_PDFA1"
        profile = intent.DestOutputProfile
        assert profile.N == 3
        icc = profile.read_bytes()
        # 6.2.3: a monitor (or printer) profile, RGB, ICC version below 5.
        assert (icc[12:16], icc[16:20], icc[8]) == (b"mntr", b"RGB ", 4)
        cms = ImageCms.ImageCmsProfile(io.BytesIO(icc))
        assert "sRGB" in ImageCms.getProfileDescription(cms)
        for font in _fonts(pdf):
            (cid_font,) = font.DescendantFonts
            assert "/FontFile2" in cid_font.FontDescriptor
            # 6.2.11.8: no code shows .notdef: every CID maps to glyph 1.
            assert cid_font.CIDToGIDMap.read_bytes() == b"\x00\x01" * 65536


def _fonts(pdf: pikepdf.Pdf) -> list[pikepdf.Object]:
    return [
        font
        for page in pdf.pages
        for font in page.Resources.get("/Font", {}).values()
        if font.get("/Subtype") == "/Type0"
    ]


def test_pdfa_output_is_pdfa_2b_and_keeps_the_images_and_the_info(tmp_path: Path) -> None:
    source = tmp_path / "in.pdf"
    scan_pdf(source, [{}, {"rotate": 90}])
    with pikepdf.open(source, allow_overwriting_input=True) as pdf:
        pdf.docinfo.Title = "Quarterly report"
        pdf.docinfo.Author = "Finance"
        pdf.docinfo.Producer = "Scanner 3000"
        pdf.docinfo.CreationDate = "D:20240102030405Z"
        pdf.save(source)
    lines = {"hello searchable archive": (0.1, 0.1, 0.9, 0.15)}
    pages = (engine_page(1, lines), PageResult(2, "own words", Route.TEXT_LAYER))
    out = tmp_path / "out.pdf"
    data = searchable_pdf(OriginalFile(str(source), "pdf"), pages, pdfa=True)
    out.write_bytes(data)
    assert_pdfa_2b(out)
    with pikepdf.open(source) as before, pikepdf.open(out) as after:
        assert image_streams(after) == image_streams(before)
        old, new = before.pages[1], after.pages[1]  # not OCR'd: as it was
        assert new.obj.Contents.read_raw_bytes() == old.obj.Contents.read_raw_bytes()
        # The Info dictionary and the XMP say the same.
        meta = after.open_metadata()
        assert meta["dc:title"] == str(after.docinfo.Title) == "Quarterly report"
        assert meta["dc:creator"] == ["Finance"] and str(after.docinfo.Author) == "Finance"
        assert meta["pdf:Producer"] == str(after.docinfo.Producer) == "Scanner 3000"
        assert meta["xmp:CreateDate"].startswith("2024-01-02T03:04:05")
    assert [w for w, _ in found_words(out)[0]] == ["hello", "searchable", "archive"]
    # Same input, same bytes (no "now" in the metadata).
    assert searchable_pdf(OriginalFile(str(source), "pdf"), pages, pdfa=True) == data
    # Without --pdfa nothing of it.
    plain = searchable_pdf(OriginalFile(str(source), "pdf"), pages)
    with pikepdf.open(io.BytesIO(plain)) as pdf:
        assert "/OutputIntents" not in pdf.Root and "/Metadata" not in pdf.Root


def test_pdfa_applies_to_born_digital_pdfs_and_images_too(tmp_path: Path) -> None:
    source = tmp_path / "in.pdf"
    scan_pdf(source, [{}])
    untouched = (PageResult(1, "own words", Route.TEXT_LAYER),)
    out = tmp_path / "out.pdf"
    out.write_bytes(searchable_pdf(OriginalFile(str(source), "pdf"), untouched, pdfa=True))
    assert out.read_bytes() != source.read_bytes()
    assert_pdfa_2b(out)
    photo = tmp_path / "photo.jpg"
    Image.linear_gradient("L").convert("RGB").resize((600, 300)).save(photo, dpi=(150, 150))
    lines = {"invoice total": (0.1, 0.5, 0.6, 0.6)}
    out.write_bytes(
        searchable_pdf(OriginalFile(str(photo), "image"), (engine_page(1, lines),), pdfa=True)
    )
    assert_pdfa_2b(out)
    with pikepdf.open(out) as pdf:
        assert image_streams(pdf) == [photo.read_bytes()]


def test_an_encrypted_input_keeps_its_encryption_and_is_not_pdfa(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    source = locked_scan_pdf(tmp_path)
    lines = {"secret ledger": (0.2, 0.2, 0.5, 0.24)}
    out = tmp_path / "out.pdf"
    with caplog.at_level(logging.WARNING, logger="ocrflow.sinks.searchable_pdf"):
        out.write_bytes(
            searchable_pdf(
                OriginalFile(str(source), "pdf", "sesame"),
                (engine_page(1, lines),),
                pdfa=True,
                name="vault/locked.pdf",
            )
        )
    assert "vault/locked.pdf is encrypted" in caplog.text and "not PDF/A" in caplog.text
    with pytest.raises(pikepdf.PasswordError):
        pikepdf.open(out)
    with pikepdf.open(out, password="sesame") as pdf:
        assert pdf.is_encrypted
        assert pdf.open_metadata().pdfa_status == ""
        assert "/OutputIntents" not in pdf.Root
    assert_words_at(found_words(out, "sesame")[0], lines)


def lzw_encoded(data: bytes) -> bytes:
    """``data`` as a valid LZWDecode stream (EarlyChange 1): each byte a literal 9-bit
    code, the table cleared every 200 codes so codes stay 9 bits wide."""
    codes = [256]
    for start in range(0, len(data), 200):
        codes += [*data[start : start + 200], 256]
    codes.append(257)
    bits = "".join(f"{code:09b}" for code in codes)
    bits += "0" * (-len(bits) % 8)
    return int(bits, 2).to_bytes(len(bits) // 8, "big")


def test_lzw_streams_are_rewritten_with_flate_and_pdf_2_headers_become_1_7(
    tmp_path: Path,
) -> None:
    source = tmp_path / "in.pdf"
    scan_pdf(source, [{}])
    pixels = bytes(range(256)) * 30
    with pikepdf.open(source, allow_overwriting_input=True) as pdf:
        image = pikepdf.Stream(pdf, lzw_encoded(pixels))
        image.stream_dict = pikepdf.Dictionary(
            Type=pikepdf.Name.XObject, Subtype=pikepdf.Name.Image, Width=256, Height=30,
            ColorSpace=pikepdf.Name.DeviceGray, BitsPerComponent=8,
            Filter=pikepdf.Name.LZWDecode,
        )  # fmt: skip
        assert image.read_bytes() == pixels  # qpdf reads our LZW
        pdf.pages[0].Resources.XObject.Im1 = image
        # Saved raw, or qpdf would turn the LZW into Flate itself.
        raw = pikepdf.StreamDecodeLevel.none
        pdf.save(source, force_version="2.0", stream_decode_level=raw, compress_streams=False)
    out = tmp_path / "out.pdf"
    lines = {"two images": (0.1, 0.1, 0.5, 0.15)}
    out.write_bytes(
        searchable_pdf(OriginalFile(str(source), "pdf"), (engine_page(1, lines),), pdfa=True)
    )
    assert out.read_bytes().startswith(b"%PDF-1.7")
    assert_pdfa_2b(out)
    with pikepdf.open(source) as before, pikepdf.open(out) as after:
        old, new = before.pages[0].Resources.XObject, after.pages[0].Resources.XObject
        assert old.Im1.Filter == "/LZWDecode"
        assert new.Im0.read_raw_bytes() == old.Im0.read_raw_bytes()  # Flate: kept
        assert new.Im1.Filter == "/FlateDecode" and new.Im1.read_bytes() == pixels


def text_image(turn: int) -> tuple[Image.Image, dict[str, BBox]]:
    """A page of text (850 x 1100 px) and each line's box on the upright page, the image
    turned ``turn`` degrees counter-clockwise (an engine turns it back clockwise)."""
    upright = Image.new("L", (850, 1100), 255)
    draw = ImageDraw.Draw(upright)
    font = ImageFont.truetype(FONT, 44)
    boxes = {}
    for row, text in enumerate(LINES):
        x0, y0, x1, y1 = draw.textbbox((80, 90 + 80 * row), text, font=font)
        draw.text((80, 90 + 80 * row), text, font=font, fill=0)
        boxes[text] = (x0 / 850, (y0 - 4) / 1100, x1 / 850, (y1 + 4) / 1100)
    return upright.rotate(turn, expand=True), boxes


def gray_scan_pdf(path: Path, images: list[Image.Image], dpi: float, rotate: int = 0) -> None:
    """A PDF of gray scans, one a page at ``dpi``, each page with ``/Rotate`` ``rotate``."""
    pdf = pikepdf.new()
    for image in images:
        stream = pikepdf.Stream(
            pdf, zlib.compress(image.tobytes()),
            Type=pikepdf.Name.XObject, Subtype=pikepdf.Name.Image, Width=image.width,
            Height=image.height, ColorSpace=pikepdf.Name.DeviceGray, BitsPerComponent=8,
            Filter=pikepdf.Name.FlateDecode,
        )  # fmt: skip
        width, height = image.width * 72 / dpi, image.height * 72 / dpi
        page = pikepdf.Dictionary(
            Type=pikepdf.Name.Page,
            MediaBox=pikepdf.Array([0, 0, width, height]),
            Rotate=rotate,
            Resources=pikepdf.Dictionary(XObject=pikepdf.Dictionary(Im0=stream)),
            Contents=pikepdf.Stream(pdf, f"q {width} 0 0 {height} 0 0 cm /Im0 Do Q".encode()),
        )
        pdf.pages.append(pikepdf.Page(page))
    pdf.save(path)


def shown_turn(pdf: bytes, upright: Image.Image, index: int = 0) -> int:
    """How far (degrees clockwise) page ``index`` as PDFium renders it is turned from
    ``upright``: the turn of ``upright`` its render matches best, well ahead of the others."""
    shown = pdfium.PdfDocument(pdf)[index].render(scale=0.25).to_pil().convert("L")
    differences = {}
    for turn in (0, 90, 180, 270):
        candidate = upright.rotate(-turn, expand=True)
        if (candidate.width > candidate.height) != (shown.width > shown.height):
            continue
        candidate = candidate.resize(shown.size, Image.Resampling.BOX)
        differences[turn] = ImageStat.Stat(ImageChops.difference(shown, candidate)).mean[0]
    best = min(differences, key=differences.__getitem__)
    others = [d for t, d in differences.items() if t != best]
    assert differences[best] < 4 and all(d > 3 * differences[best] + 2 for d in others)
    return best


def _engine_page_turned(lines: dict[str, BBox], turn: int) -> PageResult:
    """What an engine that turned the page ``turn`` degrees clockwise to read it records:
    the line boxes back on the page as shown, and the turn."""
    return engine_page(1, {t: unturn_box(b, turn) for t, b in lines.items()}, rotation=turn)


@pytest.mark.parametrize("rotate", [0, 90])
@pytest.mark.parametrize("turn", [90, 180, 270])
def test_rotate_pages_shows_the_page_upright_with_its_words_over_the_print(
    tmp_path: Path, rotate: int, turn: int
) -> None:
    # The image is drawn turned by the page's /Rotate plus the engine's turn, so the page
    # as shown needs the engine's turn to read.
    image, lines = text_image(rotate + turn)
    upright = text_image(0)[0]
    source = tmp_path / "in.pdf"
    gray_scan_pdf(source, [image], 100, rotate)
    pages = (_engine_page_turned(lines, turn),)
    out = tmp_path / "out.pdf"
    out.write_bytes(searchable_pdf(OriginalFile(str(source), "pdf"), pages, rotate_pages=True))
    with pikepdf.open(out) as pdf, pikepdf.open(source) as before:
        assert int(pdf.pages[0].Rotate) == (rotate + turn) % 360
        assert image_streams(pdf) == image_streams(before)
    assert shown_turn(out.read_bytes(), upright) == 0
    # The words lie over the printed ones on the page as now shown, and read left to right.
    found = found_words(out)[0]
    assert_words_at(found, lines)
    for text in LINES:
        lefts = [box[0] for word, box in found if word in text.split()]
        assert lefts == sorted(lefts) and len(lefts) == len(text.split())
    plain = subprocess.run(["pdftotext", str(out), "-"], capture_output=True, text=True).stdout
    assert plain.split() == " ".join(LINES).split()
    # Without the flag the page is shown as before (the text layer is the same).
    unturned = searchable_pdf(OriginalFile(str(source), "pdf"), pages)
    with pikepdf.open(io.BytesIO(unturned)) as pdf:
        assert int(pdf.pages[0].get("/Rotate", 0)) == rotate
    assert shown_turn(unturned, upright) == (360 - turn) % 360


def test_rotate_pages_turns_image_inputs_and_leaves_upright_pages(tmp_path: Path) -> None:
    image, lines = text_image(90)
    source = tmp_path / "sideways.png"
    image.save(source, dpi=(100, 100))
    pages = (_engine_page_turned(lines, 90),)
    out = searchable_pdf(OriginalFile(str(source), "image"), pages, rotate_pages=True)
    with pikepdf.open(io.BytesIO(out)) as pdf:
        assert int(pdf.pages[0].Rotate) == 90
    assert shown_turn(out, text_image(0)[0]) == 0
    path = tmp_path / "out.pdf"
    path.write_bytes(out)
    assert_words_at(found_words(path)[0], lines)
    # A page read as it was shown keeps its /Rotate; with --pdfa as well.
    upright, upright_lines = text_image(0)
    source = tmp_path / "upright.pdf"
    gray_scan_pdf(source, [upright], 100, 180)
    same = engine_page(1, {t: unturn_box(b, 180) for t, b in upright_lines.items()})
    both = searchable_pdf(OriginalFile(str(source), "pdf"), (same,), rotate_pages=True, pdfa=True)
    with pikepdf.open(io.BytesIO(both)) as pdf:
        assert int(pdf.pages[0].Rotate) == 180
    path.write_bytes(both)
    assert_pdfa_2b(path)
