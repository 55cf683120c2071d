"""Text-layer extraction and scoring: synthetic layers, generated PDFs, the shared corpus."""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from pathlib import Path

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c
import pytest

from ocrflow.render.textlayer import (
    MIN_SCORE_OCR_LAYER,
    TextLayer,
    extract_text_layer,
    score_text_layer,
)
from ocrflow.render.textstats import measure_ocr_noise, measure_text
from tests.needs import CORPUS as SHARED_CORPUS
from tests.needs import need_corpus_file
from tests.pdfwords import pdf_from_objects

CORPUS = SHARED_CORPUS / "pdfs"


def layer(text: str, **signals: float) -> TextLayer:
    return TextLayer(text=text, char_count=len("".join(text.split())), **signals)  # type: ignore[arg-type]


# --- the pure scorer -----------------------------------------------------------------------

GOOD = {
    "english": "The committee met on 3 May 2021 to review the budget. After a long debate, "
    "the members agreed to postpone the vote until the auditors' report (due in June) "
    "is published; COVID-19 costs were left out of the draft.",
    "german": "Größere Änderungen an der Straßenführung wurden für das Jahr 2024 beschlossen; "
    "die Bürger äußerten sich überwiegend zufrieden mit dem Ergebnis der Umfrage.",
    "french": "Les élèves étaient très occupés à préparer leur exposé sur l’histoire de la "
    "révolution française, assis à côté de la fenêtre de la bibliothèque.",
    "vietnamese": "Tiếng Việt là ngôn ngữ chính thức của Việt Nam, được khoảng một trăm triệu "
    "người sử dụng trên khắp thế giới hiện nay.",
    "icelandic": "Íslenska er vesturnorrænt, germanskt og indóevrópskt tungumál sem er einkum "
    "talað og ritað á Íslandi og er móðurmál langflestra Íslendinga.",
    "russian": "Москва является столицей России и крупнейшим по численности населения городом "
    "страны, в нём живёт более 13 миллионов человек.",
    "greek": "Η Αθήνα είναι η πρωτεύουσα και η μεγαλύτερη πόλη της Ελλάδας, με ιστορία που "
    "ξεπερνά τα τρεις χιλιάδες χρόνια.",
    "chinese": "北京是中华人民共和国的首都，也是全国的政治、文化和国际交往中心。"
    "北京有着三千多年的建城史，是世界著名古都。",
    "japanese": "東京は日本の首都であり、世界有数の大都市です。人口は約千四百万人で、"
    "多くの観光客が毎年訪れています。",
    "korean": "서울은 대한민국의 수도이자 최대 도시이다. 2020년 기준 인구는 약 970만 명이며, "
    "한강을 중심으로 발전하였다.",
    "arabic": "القاهرة هي عاصمة جمهورية مصر العربية وأكبر مدنها، وتقع على ضفاف نهر النيل، "
    "ويبلغ عدد سكانها أكثر من عشرين مليون نسمة.",
    "hebrew": "ירושלים היא בירת מדינת ישראל והעיר הגדולה ביותר בה, ויש בה אתרים קדושים "
    "לשלוש הדתות הגדולות בעולם.",
    "devanagari": "हिन्दी भारत की एक प्रमुख भाषा है और यह देवनागरी लिपि में लिखी जाती है। "
    "इसे करोड़ों लोग बोलते और समझते हैं।",
    "thai": "กรุงเทพมหานครเป็นเมืองหลวงและนครที่มีประชากรมากที่สุดของประเทศไทย "
    "เป็นศูนย์กลางการปกครองและเศรษฐกิจ",
    "code": "def main(argv: list[str]) -> int:\n    config = load_config(argv[1])\n"
    "    for item in config.items():\n        print(item.name, item.value)\n    return 0",
    "table": "Year Revenue Cost Margin\n2019 1,204.5 980.1 18.6%\n2020 1,311.0 1,002.7 23.5%\n"
    "2021 1,498.2 1,110.9 25.9%",
}


@pytest.mark.parametrize("name", sorted(GOOD))
def test_good_text_in_any_script_is_accepted(name: str) -> None:
    quality = score_text_layer(layer(GOOD[name]))
    assert quality.ok, quality
    assert quality.reasons == ()
    assert quality.score >= 0.9


def _caesar(text: str, shift: int) -> str:
    def move(c: str) -> str:
        base = 97 if c.islower() else 65
        return chr((ord(c) - base + shift) % 26 + base) if c.isascii() and c.isalpha() else c

    return "".join(map(move, text))


BAD = {
    "letter_spaced": (
        "T h i s  i s  a  l e t t e r - s p a c e d  p a r a g r a p h  w h e r e  "
        "e v e r y  g l y p h  s t a n d s  a l o n e .",
        "letter_spaced",
    ),
    "cyrillic_as_latin1": (
        "Ìîñêâà ÿâëÿåòñÿ ñòîëèöåé Ðîññèè è êðóïíåéøèì ïî ÷èñëåííîñòè íàñåëåíèÿ ãîðîäîì.",
        "mojibake",
    ),
    "utf8_as_cp1252": (
        "Les Ã©lÃ¨ves Ã©taient trÃ¨s occupÃ©s Ã  prÃ©parer leur exposÃ© sur lâ€™histoire.",
        "mojibake",
    ),
    "unmapped": (
        "\ufffd\ufffd\ufffd \ufffd\ufffd \ufffd\ufffd\ufffd\ufffd \ufffd text " * 3,
        "unmapped_glyphs",
    ),
    "glyph_ids_as_ascii": ('7KH"TXLFN"EURZQ"IR[+MXPSV"RYHU"WKH"OD]\\"GRJ' * 2, "low_wordlikeness"),
    "caesar_shift": (_caesar(GOOD["english"] * 2, 3), "shifted_glyphs"),
    "broken_conjuncts": (
        "लाटेΧ द̤ऐवज आЭण पॉЙल˝लॉЭसया मूलआ˚ासंच आЭण लाटेΧ चालवणे Ϻकबǎना असा शेवट असणारा",
        "mixed_scripts",
    ),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_garbage_text_is_rejected_with_its_reason(name: str) -> None:
    text, reason = BAD[name]
    quality = score_text_layer(layer(text))
    assert not quality.ok
    assert reason in quality.reasons
    assert quality.score < 0.7


def test_removed_control_characters_count_as_unmapped_glyphs() -> None:
    text = GOOD["english"]
    assert score_text_layer(layer(text, control_chars=2)).ok
    quality = score_text_layer(layer(text, control_chars=40))
    assert "unmapped_glyphs" in quality.reasons


def test_too_short_and_empty_layers_are_rejected() -> None:
    assert score_text_layer(layer("")).reasons == ("too_short",)
    assert score_text_layer(layer("Page 3 of 12")).reasons == ("too_short",)


def test_sparse_text_on_a_page_mostly_covered_by_images_is_rejected() -> None:
    quality = score_text_layer(layer("Figure 3: Results of the survey", image_coverage=0.8))
    assert quality.reasons == ("sparse_text_over_image",)
    assert score_text_layer(layer(GOOD["english"] * 2, image_coverage=0.8)).ok


def test_invisible_text_without_a_scan_under_it_is_rejected() -> None:
    quality = score_text_layer(layer(GOOD["english"], hidden_share=0.6))
    assert quality.reasons == ("invisible_text",)


CLEAN_OCR = (
    "The LinnSequencer is a state-of-the-art composition and performance tool for the "
    "professional musician. It is extremely powerful, yet amazingly simple to learn and use. "
    "Its many remarkable features include real-time recording, 32 tracks and a memory of "
    "60,000 notes per disk. One or all tracks may be transposed at the touch of a key."
)
NOISY_OCR = (
    'Christians behaving themselves like Ma borne- a. t>. dans.3 ."5/0- The natives soon '
    "had reason to suspect the viceroy, &»“«■' For about this time the Dominican friars, "
    "under pretence of building a. convent, erected a for tress on the island of Sol or, "
    "which, as soon as finished, the viceroy garrisoned. The natives' very naturally felt "
    "indigS nant at this additional encroachment, and took every d u c opportunity."
)


def test_a_clean_ocr_layer_over_a_scan_is_kept() -> None:
    scan = {"image_coverage": 1.0, "hidden_share": 1.0}
    assert measure_ocr_noise(CLEAN_OCR) < 0.01
    quality = score_text_layer(layer(CLEAN_OCR, **scan))
    assert quality.ok and quality.score >= MIN_SCORE_OCR_LAYER


def test_a_noisy_ocr_layer_over_a_scan_is_read_again() -> None:
    scan = {"image_coverage": 1.0, "hidden_share": 1.0}
    # Structurally it is fine text: only the OCR-layer bar rejects it.
    assert score_text_layer(layer(NOISY_OCR)).ok
    quality = score_text_layer(layer(NOISY_OCR, **scan))
    assert not quality.ok
    assert quality.reasons == ("ocr_layer_over_scan", "low_score")


def test_ocr_layers_can_be_refused_outright() -> None:
    scan = {"image_coverage": 1.0, "hidden_share": 1.0}
    assert not score_text_layer(layer(CLEAN_OCR, **scan), min_score_ocr_layer=1.01).ok


def test_an_ocr_layer_without_letters_is_read_again() -> None:
    # An engine set to the wrong language keeps the digits of a Chinese page and little else.
    digits = "2015 ( ) 2014 ( [2015] 246 ) 2016 3 21 3,000 2015-09-21 2016-03-21 " * 3
    quality = score_text_layer(layer(digits, image_coverage=1.0, hidden_share=1.0))
    assert not quality.ok


def test_measure_text_reports_shares_in_range() -> None:
    stats = measure_text(GOOD["korean"] + GOOD["english"])
    for value in (stats.unmapped, stats.wordlike, stats.mixed_script, stats.letter_spaced):
        assert 0.0 <= value <= 1.0
    assert stats.wordlike > 0.95 and stats.mixed_script == 0.0


# --- extraction from generated PDFs ----------------------------------------------------------


def _widestring(text: str) -> ctypes.Array[ctypes.c_ushort]:
    data = (text + "\0").encode("utf-16-le")
    return (ctypes.c_ushort * (len(data) // 2)).from_buffer_copy(data)


def _add_text(
    doc: pdfium.PdfDocument, page: pdfium.PdfPage, text: str, y: float, mode: int = 0
) -> None:
    obj = pdfium_c.FPDFPageObj_NewTextObj(doc, b"Helvetica", 12.0)
    assert pdfium_c.FPDFText_SetText(obj, _widestring(text))
    pdfium_c.FPDFTextObj_SetTextRenderMode(obj, mode)
    pdfium_c.FPDFPageObj_Transform(obj, 1, 0, 0, 1, 72, y)
    pdfium_c.FPDFPage_InsertObject(page, obj)


def _add_page_image(
    doc: pdfium.PdfDocument, page: pdfium.PdfPage, width: float, height: float
) -> None:
    bitmap = pdfium.PdfBitmap.new_native(8, 8, pdfium_c.FPDFBitmap_BGR)
    bitmap.fill_rect((200, 200, 200, 255), 0, 0, 8, 8)
    image = pdfium_c.FPDFPageObj_NewImageObj(doc)
    assert pdfium_c.FPDFImageObj_SetBitmap(None, 0, image, bitmap)
    pdfium_c.FPDFImageObj_SetMatrix(image, width, 0, 0, height, 0, 0)
    pdfium_c.FPDFPage_InsertObject(page, image)
    bitmap.close()


def _reopen(doc: pdfium.PdfDocument, tmp_path: Path) -> pdfium.PdfDocument:
    target = tmp_path / "made.pdf"
    doc.save(target)
    doc.close()
    return pdfium.PdfDocument(target)


PARAGRAPH = [
    "Born-digital text drawn with a standard font.",
    "Its second line keeps reading order intact,",
    "and the third line ends the first paragraph.",
]


@pytest.fixture
def make_pdf(tmp_path: Path) -> Iterator[object]:
    opened: list[pdfium.PdfDocument] = []

    def make(*, hidden: bool = False, scan: bool = False) -> pdfium.PdfDocument:
        doc = pdfium.PdfDocument.new()
        page = doc.new_page(612, 792)
        for i, line in enumerate(PARAGRAPH):
            _add_text(doc, page, line, 700 - 14 * i, mode=3 if hidden else 0)
        _add_text(doc, page, "A second paragraph after a gap.", 600, mode=3 if hidden else 0)
        if scan:
            _add_page_image(doc, page, 612, 792)
        assert pdfium_c.FPDFPage_GenerateContent(page)
        page.close()
        reopened = _reopen(doc, tmp_path)
        opened.append(reopened)
        return reopened

    yield make
    for doc in opened:
        doc.close()


def test_extracts_born_digital_text_in_reading_order(make_pdf) -> None:  # type: ignore[no-untyped-def]
    page = make_pdf()[0]
    result = extract_text_layer(page)
    page.close()
    assert result.text == "\n".join(PARAGRAPH) + "\n\nA second paragraph after a gap."
    assert result.char_count == len("".join(result.text.split()))
    assert result.control_chars == 0
    assert result.image_coverage == 0.0 and result.hidden_share == 0.0
    assert score_text_layer(result).ok


def test_invisible_text_is_measured(make_pdf) -> None:  # type: ignore[no-untyped-def]
    page = make_pdf(hidden=True)[0]
    result = extract_text_layer(page)
    page.close()
    assert result.hidden_share == 1.0
    assert score_text_layer(result).reasons == ("invisible_text",)


def test_text_painted_under_a_page_sized_image_is_hidden(make_pdf) -> None:  # type: ignore[no-untyped-def]
    page = make_pdf(scan=True)[0]
    result = extract_text_layer(page)
    page.close()
    assert result.image_coverage == pytest.approx(1.0)
    assert result.hidden_share == 1.0


def _stream(entries: bytes, data: bytes) -> bytes:
    return b"<< /Length %d %s >>\nstream\n%s\nendstream" % (len(data), entries, data)


def test_images_inside_form_xobjects_are_measured_in_page_space() -> None:
    # The page draws a form at half scale; the form's image fills the form: a quarter page.
    pdf = pdf_from_objects(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] "
            b"/Resources << /XObject << /Fm1 5 0 R >> >> /Contents 4 0 R >>",
            _stream(b"", b"q 0.5 0 0 0.5 0 0 cm /Fm1 Do Q"),
            _stream(
                b"/Type /XObject /Subtype /Form /BBox [0 0 200 200] "
                b"/Resources << /XObject << /Im1 6 0 R >> >>",
                b"q 200 0 0 200 0 0 cm /Im1 Do Q",
            ),
            _stream(
                b"/Type /XObject /Subtype /Image /Width 1 /Height 1 "
                b"/ColorSpace /DeviceGray /BitsPerComponent 8",
                b"\x80",
            ),
        ]
    )
    doc = pdfium.PdfDocument(pdf)
    page = doc[0]
    result = extract_text_layer(page)
    page.close()
    doc.close()
    assert result.image_coverage == pytest.approx(0.25)
    assert result.text == "" and score_text_layer(result).reasons == ("too_short",)


# --- the shared corpus -------------------------------------------------------------------------

ACCEPT = [
    ("pdfjs__tracemonkey.pdf", 1),
    ("pdfjs__tracemonkey.pdf", 7),
    ("docling__2305.03393v1-pg9.pdf", 1),
    ("docling__redp5110_sampled.pdf", 1),
    ("docling__redp5110_sampled.pdf", 5),
    ("olmocr__edgar.pdf", 1),
    ("texlive__texlive-ru.pdf", 10),
    ("texlive__lshort-zh-cn.pdf", 20),
    ("docling__right_to_left_01.pdf", 1),
    ("docling__normal_4pages.pdf", 1),
    ("docling__normal_4pages.pdf", 3),
    ("texlive__cjhebrew.pdf", 1),
    ("pdfplumber__federal-register-2020-17221.pdf", 1),
    ("pypdf-samples__GeoTopo-komprimiert.pdf", 10),
    ("texlive__lshort-persian.pdf", 20),
    ("unstructured__korean-text-with-tables.pdf", 1),
    # The manifest calls these broken; pdfium extracts them well (see the report).
    ("texlive__cnbook-impatient-cn.pdf", 25),
    ("texlive__velthuis-hindi.pdf", 1),
    # Existing OCR layers clean enough to keep (Tesseract sandwich, a Dutch recipe).
    ("pikepdf__sandwich.pdf", 1),
    ("pikepdf__jbig2global.pdf", 1),
]

REJECT = [
    ("texlive__lshortru.pdf", 5, "mojibake"),
    ("texlive__lshortru.pdf", 142, "mojibake"),  # index page: only its running head broken
    ("ocrmypdf__truetype_font_nomapping.pdf", 1, "too_short"),
    ("ocrmypdf__type3_font_nomapping.pdf", 1, "too_short"),
    ("texlive__latex-mr.pdf", 5, "mixed_scripts"),  # conjuncts mapped to Cyrillic/Greek
    ("docling__redp5110_sampled.pdf", 3, "unmapped_glyphs"),  # sidebar in a font w/o map
    ("pdfjs__ThuluthFeatures.pdf", 1, "unmapped_glyphs"),
    ("olmocr__handwriting_bad_ocr.pdf", 1, "ocr_layer_over_scan"),
    ("olmocr__horribleocr.pdf", 1, "ocr_layer_over_scan"),
    ("olmocr__some_ocr1.pdf", 1, "ocr_layer_over_scan"),
    ("olmocr__newspaper.pdf", 1, "ocr_layer_over_scan"),
    ("unstructured__pdf-with-ocr-text.pdf", 1, "ocr_layer_over_scan"),
    ("pdfplumber__pr-136-example.pdf", 2, "ocr_layer_over_scan"),
    ("docling__invisible_text_layer.pdf", 1, "invisible_text"),
    ("ocrmypdf__multipage.pdf", 1, "too_short"),  # a scan without any text
    ("olmocr__slideshow_mostly_images.pdf", 11, "sparse_text_over_image"),
    ("texlive__cnbook-impatient-cn.pdf", 30, "ocr_layer_over_scan"),  # header under a picture
]


def _corpus_layer(name: str, number: int) -> TextLayer:
    path = CORPUS / name
    need_corpus_file(path)
    doc = pdfium.PdfDocument(path)
    try:
        page = doc[number - 1]
        try:
            return extract_text_layer(page)
        finally:
            page.close()
    finally:
        doc.close()


@pytest.mark.parametrize(("name", "number"), ACCEPT)
def test_corpus_layers_to_accept(name: str, number: int) -> None:
    quality = score_text_layer(_corpus_layer(name, number))
    assert quality.ok, quality


@pytest.mark.parametrize(("name", "number", "reason"), REJECT)
def test_corpus_layers_to_reject(name: str, number: int, reason: str) -> None:
    quality = score_text_layer(_corpus_layer(name, number))
    assert not quality.ok
    assert reason in quality.reasons, quality
