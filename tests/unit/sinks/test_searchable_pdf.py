"""The searchable-PDF sink on generated files, checked with poppler's ``pdftotext``.

Every fixture is made here (pikepdf, Pillow) with known geometry: a page's crop box lies
inside an offset media box, ``/Rotate`` takes each of its four values, the engine may have
turned the page to read it, and the recorded line boxes say where pdftotext must find each
word (fractions of the page as shown).
"""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import zlib
from pathlib import Path

import pikepdf
import pypdfium2 as pdfium
import pytest
from PIL import Image

from ocrflow.sinks.base import DocumentMeta, FinishedDocument, OriginalFile
from ocrflow.sinks.searchable_pdf import PdfSink, pdf_key, searchable_pdf
from ocrflow.storage.local import LocalStore
from ocrflow.types import (
    BBox,
    Block,
    BlockLabel,
    DocStatus,
    DocumentResult,
    Line,
    PageResult,
    Route,
    Word,
)

if shutil.which("pdftotext") is None:
    pytest.skip(
        "[needs poppler] pdftotext is not installed (Debian: poppler-utils)",
        allow_module_level=True,
    )

SLACK = 0.006
_WORD = re.compile(
    r'<word xMin="([-\d.]+)" yMin="([-\d.]+)" xMax="([-\d.]+)" yMax="([-\d.]+)">([^<]*)</word>'
)
_PAGE = re.compile(r'<page width="([\d.]+)" height="([\d.]+)">(.*?)</page>', re.S)


def engine_page(number: int, lines: dict[str, BBox], *, rotation: int = 0) -> PageResult:
    """An OCR'd page whose block holds ``lines`` (text -> line box, page as rendered)."""
    text = "\n".join(lines)
    block = Block(
        BlockLabel.TEXT, text, None, 0.9, tuple(Line(t, b, 0.9) for t, b in lines.items())
    )
    return PageResult(
        number, text, Route.ENGINE, blocks=(block,), attributes={"rotation": rotation}
    )


def scan_pdf(path: Path, pages: list[dict[str, object]]) -> None:
    """A PDF of image pages: each page dict may give ``media``, ``crop``, ``rotate``; the
    content leaves its CTM changed (no q/Q), as many scanners' files do."""
    pdf = pikepdf.new()
    for index, spec in enumerate(pages):
        gray = Image.linear_gradient("L").resize((120, 160)).rotate(index * 7)
        image = pikepdf.Stream(
            pdf, zlib.compress(gray.tobytes()),
            Type=pikepdf.Name.XObject, Subtype=pikepdf.Name.Image, Width=120, Height=160,
            ColorSpace=pikepdf.Name.DeviceGray, BitsPerComponent=8,
            Filter=pikepdf.Name.FlateDecode,
        )  # fmt: skip
        page = pikepdf.Dictionary(
            Type=pikepdf.Name.Page,
            MediaBox=pikepdf.Array(spec.get("media", [0, 0, 612, 792])),
            Rotate=spec.get("rotate", 0),
            Resources=pikepdf.Dictionary(XObject=pikepdf.Dictionary(Im0=image)),
            Contents=pikepdf.Stream(pdf, b"2 0 0 2 0 0 cm 300 0 0 390 0 0 cm /Im0 Do"),
        )
        if "crop" in spec:
            page.CropBox = pikepdf.Array(spec["crop"])
        pdf.pages.append(pikepdf.Page(page))
    pdf.save(path)


def found_words(pdf: Path, password: str = "") -> list[list[tuple[str, BBox]]]:
    """Each page's words per ``pdftotext -cropbox -bbox``, as fractions of the page shown."""
    extra = ["-upw", password] if password else []
    out = subprocess.run(
        ["pdftotext", *extra, "-cropbox", "-bbox", str(pdf), "-"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    with pikepdf.open(pdf, password=password) as opened:
        turns = [int(p.obj.get("/Rotate", 0)) % 180 for p in opened.pages]
    pages = []
    for turn, (width, height, body) in zip(turns, _PAGE.findall(out), strict=True):
        w, h = (float(height), float(width)) if turn else (float(width), float(height))
        words = _WORD.findall(body)
        pages.append(
            [
                (t, (float(a) / w, float(b) / h, float(c) / w, float(d) / h))
                for a, b, c, d, t in words
            ]
        )
    return pages


def within(box: BBox, outer: BBox) -> bool:
    return all(box[i] >= outer[i] - SLACK for i in (0, 1)) and all(
        box[i] <= outer[i] + SLACK for i in (2, 3)
    )


def assert_words_at(found: list[tuple[str, BBox]], lines: dict[str, BBox]) -> None:
    """Every word of ``lines`` (all different) is found inside its line's box, and each
    line's words come in order (pdftotext may order turned lines its own way)."""
    where = {word: box for text, box in lines.items() for word in text.split()}
    assert sorted(t for t, _ in found) == sorted(where)
    for text, box in found:
        assert within(box, where[text]), (text, box, where[text])
    order = [t for t, _ in found]
    for text in lines:
        positions = [order.index(word) for word in text.split()]
        assert positions == sorted(positions), (text, order)


@pytest.mark.parametrize("rotate", [0, 90, 180, 270])
@pytest.mark.parametrize("turn", [0, 90, 270])
def test_words_land_in_their_boxes_on_rotated_offset_pages(
    tmp_path: Path, rotate: int, turn: int
) -> None:
    source = tmp_path / "in.pdf"
    scan_pdf(source, [{"media": [10, 20, 622, 812], "crop": [30, 40, 600, 780], "rotate": rotate}])
    # A line the engine read after turning the page by ``turn``: its box on the page as
    # shown is tall and narrow for a quarter turn.
    # The first line is at the top of the page as read: the left edge of the page shown
    # for a page turned 90 clockwise to read it, the right edge for 270.
    lines = {
        0: {"Quarterly report": (0.1, 0.2, 0.6, 0.25), "fell by twelve": (0.1, 0.3, 0.5, 0.34)},
        90: {"Quarterly report": (0.2, 0.1, 0.25, 0.6), "fell by twelve": (0.3, 0.1, 0.34, 0.5)},
        270: {"Quarterly report": (0.75, 0.1, 0.8, 0.6), "fell by twelve": (0.66, 0.1, 0.7, 0.5)},
    }[turn]
    out = tmp_path / "out.pdf"
    out.write_bytes(
        searchable_pdf(OriginalFile(str(source), "pdf"), (engine_page(1, lines, rotation=turn),))
    )
    found = found_words(out)[0]
    # Reading order along the turned lines: for a page turned 90 clockwise to read, the
    # text runs bottom to top, so "Quarterly" is lowest on the page as shown.
    assert_words_at(found, lines)
    # PDFium (what ocrflow itself reads PDFs with) finds the words too, whichever way
    # they run, and the page looks exactly as before: the text is never painted.
    document = pdfium.PdfDocument(out.read_bytes())
    assert sorted(document[0].get_textpage().get_text_range().split()) == sorted(
        " ".join(lines).split()
    )
    before = pdfium.PdfDocument(str(source))[0].render(scale=0.5).to_pil()
    assert document[0].render(scale=0.5).to_pil().tobytes() == before.tobytes()
    first, second = found[0][1], found[1][1]
    if turn == 90:
        assert first[1] > second[1]
    elif turn == 270:
        assert first[1] < second[1]
    else:
        assert first[0] < second[0]


def test_pdf_pages_keep_their_streams_and_unread_pages_stay(tmp_path: Path) -> None:
    source = tmp_path / "in.pdf"
    scan_pdf(source, [{}, {}, {"rotate": 90}])
    lines = {"hello searchable world": (0.1, 0.1, 0.9, 0.15)}
    pages = (
        engine_page(1, lines),
        PageResult(2, "own words", Route.TEXT_LAYER),
        engine_page(3, lines),
    )
    out = tmp_path / "out.pdf"
    out.write_bytes(searchable_pdf(OriginalFile(str(source), "pdf"), pages))
    with pikepdf.open(source) as before, pikepdf.open(out) as after:
        for number, (old, new) in enumerate(zip(before.pages, after.pages, strict=True), 1):
            old_image, new_image = old.Resources.XObject.Im0, new.Resources.XObject.Im0
            assert new_image.read_raw_bytes() == old_image.read_raw_bytes()
            old_content = old.obj.Contents.read_raw_bytes()
            if number == 2:  # read from its text layer: exactly as it was
                assert new.obj.Contents.read_raw_bytes() == old_content
                assert "/Font" not in new.Resources
            else:  # q, its own stream unchanged, then Q and our text
                streams = [s.read_raw_bytes() for s in new.obj.Contents]
                assert len(streams) == 3 and streams[1] == old_content
                assert new.obj.Contents[0].read_bytes().strip() == b"q"
    words = found_words(out)
    assert [w for w, _ in words[0]] == ["hello", "searchable", "world"]
    assert words[1] == []
    assert_words_at(words[2], lines)


def test_a_pdf_without_ocr_pages_is_copied_byte_for_byte(tmp_path: Path) -> None:
    source = tmp_path / "in.pdf"
    scan_pdf(source, [{}])
    pages = (PageResult(1, "own words", Route.TEXT_LAYER), PageResult(2, "", Route.BLANK))
    assert searchable_pdf(OriginalFile(str(source), "pdf"), pages) == source.read_bytes()


def test_fallback_pages_follow_what_read_them(tmp_path: Path) -> None:
    source = tmp_path / "in.pdf"
    scan_pdf(source, [{}, {}])
    box = {"fallback engine words": (0.1, 0.1, 0.9, 0.15)}
    by_engine = engine_page(1, box)
    pages = tuple(
        PageResult(n, by_engine.text, Route.FALLBACK, blocks=by_engine.blocks, attributes=a)
        for n, a in ((1, {"fallback": "engine"}), (2, {"fallback": "text_layer"}))
    )
    out = tmp_path / "out.pdf"
    out.write_bytes(searchable_pdf(OriginalFile(str(source), "pdf"), pages))
    words = found_words(out)
    assert [w for w, _ in words[0]] == ["fallback", "engine", "words"] and words[1] == []


def locked_scan_pdf(tmp_path: Path) -> Path:
    """A one-page scan encrypted with user password "sesame" (AES-256)."""
    plain = tmp_path / "plain.pdf"
    scan_pdf(plain, [{}])
    source = tmp_path / "locked.pdf"
    with pikepdf.open(plain) as pdf:
        pdf.save(source, encryption=pikepdf.Encryption(user="sesame", owner="owner-pw", R=6))
    return source


def test_encrypted_pdf_stays_encrypted_and_searchable(tmp_path: Path) -> None:
    source = locked_scan_pdf(tmp_path)
    lines = {"secret ledger": (0.2, 0.2, 0.5, 0.24)}
    out = tmp_path / "out.pdf"
    out.write_bytes(
        searchable_pdf(OriginalFile(str(source), "pdf", "sesame"), (engine_page(1, lines),))
    )
    with pytest.raises(pikepdf.PasswordError):
        pikepdf.open(out)
    with (
        pikepdf.open(out, password="sesame") as pdf,
        pikepdf.open(source, password="sesame") as old,
    ):
        assert pdf.is_encrypted
        image = pdf.pages[0].Resources.XObject.Im0.read_raw_bytes()
        assert image == old.pages[0].Resources.XObject.Im0.read_raw_bytes()
    assert_words_at(found_words(out, "sesame")[0], lines)


def test_any_script_round_trips(tmp_path: Path) -> None:
    source = tmp_path / "in.pdf"
    scan_pdf(source, [{}])
    lines = {
        "Привет мир": (0.1, 0.1, 0.5, 0.14),
        "中文 文本": (0.1, 0.2, 0.5, 0.24),
        "Größe ½ ﬁnal": (0.1, 0.3, 0.5, 0.34),
        "𝔘nicode 😀 ok": (0.1, 0.4, 0.5, 0.44),
    }
    out = tmp_path / "out.pdf"
    out.write_bytes(searchable_pdf(OriginalFile(str(source), "pdf"), (engine_page(1, lines),)))
    text = subprocess.run(["pdftotext", str(out), "-"], capture_output=True, text=True).stdout
    expected = ["Привет", "мир", "中文", "文本", "Größe", "½", "ﬁnal", "𝔘nicode", "😀", "ok"]
    assert text.split() == expected
    # PDFium reads them back too (it spells ligatures out).
    page = pdfium.PdfDocument(out.read_bytes())[0]
    spelled = [word.replace("ﬁ", "fi") for word in expected]
    assert page.get_textpage().get_text_range().split() == spelled


def test_jpeg_is_embedded_as_it_is_at_its_resolution(tmp_path: Path) -> None:
    source = tmp_path / "photo.jpg"
    Image.linear_gradient("L").convert("RGB").resize((600, 300)).save(source, dpi=(150, 150))
    lines = {"invoice total": (0.1, 0.5, 0.6, 0.6)}
    out = tmp_path / "out.pdf"
    out.write_bytes(searchable_pdf(OriginalFile(str(source), "image"), (engine_page(1, lines),)))
    with pikepdf.open(out) as pdf:
        page = pdf.pages[0]
        (image,) = page.Resources.XObject.values()
        assert image.Filter == "/DCTDecode"
        assert image.read_raw_bytes() == source.read_bytes()
        assert [float(v) for v in page.MediaBox] == [0, 0, 600 * 72 / 150, 300 * 72 / 150]
    assert_words_at(found_words(out)[0], lines)


def test_exif_orientation_is_shown_by_the_placement(tmp_path: Path) -> None:
    source = tmp_path / "sideways.jpg"
    exif = Image.Exif()
    exif[0x0112] = 6  # shown turned 90 clockwise: the 400x200 file shows 200x400
    Image.new("RGB", (400, 200), "white").save(source, exif=exif.tobytes(), dpi=(100, 100))
    lines = {"upright text": (0.1, 0.1, 0.8, 0.15)}
    out = tmp_path / "out.pdf"
    out.write_bytes(searchable_pdf(OriginalFile(str(source), "image"), (engine_page(1, lines),)))
    with pikepdf.open(out) as pdf:
        width, height = (float(v) for v in pdf.pages[0].MediaBox[2:])
        assert (width, height) == (200 * 72 / 100, 400 * 72 / 100)
    rendered = subprocess.run(
        ["pdftoppm", "-r", "100", "-gray", str(out)], capture_output=True, check=True
    ).stdout
    assert Image.open(io.BytesIO(rendered)).size == (200, 400)
    assert_words_at(found_words(out)[0], lines)


def test_multi_frame_tiff_gives_a_page_a_frame(tmp_path: Path) -> None:
    source = tmp_path / "scan.tiff"
    frames = [Image.new("1", (850, 1100), 1), Image.new("L", (1100, 850), 200)]
    frames[0].save(source, save_all=True, append_images=frames[1:], dpi=(100, 100))
    lines = {"second frame": (0.1, 0.1, 0.4, 0.15)}
    out = tmp_path / "out.pdf"
    out.write_bytes(searchable_pdf(OriginalFile(str(source), "image"), (engine_page(2, lines),)))
    with pikepdf.open(out) as pdf:
        sizes = [[float(v) for v in p.MediaBox[2:]] for p in pdf.pages]
        bits = [next(iter(p.Resources.XObject.values())).BitsPerComponent for p in pdf.pages]
    assert sizes == [[612, 792], [792, 612]] and bits == [1, 8]
    words = found_words(out)
    assert words[0] == []
    assert_words_at(words[1], lines)


def test_word_boxes_from_the_engine_are_used(tmp_path: Path) -> None:
    source = tmp_path / "in.pdf"
    scan_pdf(source, [{}])
    words = (Word("wide", (0.1, 0.1, 0.4, 0.14)), Word("gap", (0.7, 0.1, 0.8, 0.14)))
    block = Block(
        BlockLabel.TEXT,
        "wide gap",
        None,
        None,
        (Line("wide gap", (0.1, 0.1, 0.8, 0.14), None, words),),
    )
    page = PageResult(1, "wide gap", Route.ENGINE, blocks=(block,))
    out = tmp_path / "out.pdf"
    out.write_bytes(searchable_pdf(OriginalFile(str(source), "pdf"), (page,)))
    found = found_words(out)[0]
    assert [w for w, _ in found] == ["wide", "gap"]
    # A word before a gap wider than half a size runs on into it (a text extractor reads
    # the line whole), short of the next word; every word starts where it is printed.
    (_, first), (_, second) = found
    assert within(first, (0.1, 0.1, 0.7, 0.14)) and first[2] > 0.6
    assert within(second, (0.7, 0.1, 0.8, 0.14)) and second[2] - second[0] > 0.08


def test_text_without_boxes_is_still_searchable(tmp_path: Path) -> None:
    source = tmp_path / "in.pdf"
    scan_pdf(source, [{}])
    page = PageResult(1, "# Title\n\nA paragraph with **bold** words.", Route.ENGINE)
    out = tmp_path / "out.pdf"
    out.write_bytes(searchable_pdf(OriginalFile(str(source), "pdf"), (page,)))
    text = subprocess.run(["pdftotext", str(out), "-"], capture_output=True, text=True).stdout
    assert text.split() == ["Title", "A", "paragraph", "with", "bold", "words."]


def _document(
    rel: str, pages: tuple[PageResult, ...], original: OriginalFile | None
) -> FinishedDocument:
    status = DocStatus.OK if pages else DocStatus.FAILED
    result = DocumentResult("d" * 24, rel, status, pages, len(pages))
    return FinishedDocument(result, DocumentMeta(rel, "0" * 64, None, "test", "fp"), original)


def test_sink_writes_atomically_deterministically_and_skips_what_it_must(tmp_path: Path) -> None:
    source = tmp_path / "in.pdf"
    scan_pdf(source, [{}])
    page = engine_page(1, {"some words": (0.1, 0.1, 0.4, 0.14)})
    store = LocalStore(tmp_path / "out")
    sink = PdfSink(store)
    sink.write(_document("a/in.pdf", (page,), OriginalFile(str(source), "pdf")))
    first = (tmp_path / "out" / pdf_key("a/in.pdf")).read_bytes()
    sink.write(_document("a/in.pdf", (page,), OriginalFile(str(source), "pdf")))
    assert (tmp_path / "out" / pdf_key("a/in.pdf")).read_bytes() == first  # same bytes
    sink.write(_document("b.pdf", (page,), None))  # original gone: nothing written
    sink.write(_document("c.pdf", (), OriginalFile(str(source), "pdf")))  # failed document
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"%PDF-1.7\nnot really")
    sink.write(_document("d.pdf", (page,), OriginalFile(str(broken), "pdf")))  # logged, skipped
    sink.close()
    assert sorted(p.name for p in (tmp_path / "out" / "pdf").rglob("*.pdf")) == ["in.pdf.pdf"]
    assert pdf_key("a/in.pdf") == "pdf/a/in.pdf.pdf"
