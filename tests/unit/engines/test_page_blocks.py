"""The OCR engines' blocks: on generated pages whose words are drawn at known places, every
recognised word lies inside its block's box (and its line's), on the page as it was sent,
however the engine turned it to read it; blocks come in the order of the text."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from collections import Counter
from collections.abc import Sequence

import pytest
from PIL import Image, ImageDraw, ImageFont

from ocrflow.engines.embedded import EmbeddedEngine
from ocrflow.engines.tesseract import TesseractEngine, page_file_bytes
from ocrflow.engines.tesseract_tsv import parse_tsv
from ocrflow.errors import EngineError
from ocrflow.render.jobs import encode_image
from ocrflow.types import BBox, Block, BlockLabel, PageRequest
from tests.pdfwords import inside

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
#: Slack around a drawn word's box: the detector's boxes are a few pixels loose or tight.
TOLERANCE = 0.012

HEADER = "Northwind archive bulletin"
TITLE = "Harbour Ledger"
PARAGRAPHS = (
    ("The reading room received four hundred boxes", "of letters and invoices during March"),
    ("Every box was scanned twice and checked", "by two archivists before storage"),
    ("Costs fell because the new scanners", "need less manual cropping"),
)
FOOTER = "page seven of nine"

Word = tuple[str, BBox]


def draw_page() -> tuple[Image.Image, list[Word]]:
    """A 1000 x 1400 page: running header, a large title, three paragraphs, a footer; and
    each word's box in 0..1 of the page."""
    image = Image.new("RGB", (1000, 1400), "white")
    draw = ImageDraw.Draw(image)
    words: list[Word] = []

    def line(text: str, x: int, y: int, size: int) -> None:
        font = ImageFont.truetype(FONT, size)
        for token in text.split():
            left, top, right, bottom = draw.textbbox((x, y), token, font=font)
            draw.text((x, y), token, font=font, fill="black")
            words.append((token, (left / 1000, top / 1400, right / 1000, bottom / 1400)))
            x = right + size // 2

    line(HEADER, 80, 40, 22)
    line(TITLE, 80, 150, 50)
    y = 280
    for paragraph in PARAGRAPHS:
        for text in paragraph:
            line(text, 80, y, 28)
            y += 42
        y += 50
    line(FOOTER, 80, 1330, 22)
    return image, words


def turned(box: BBox, degrees: int) -> BBox:
    """``box`` on the page after turning it ``degrees`` clockwise: (u, v) -> (1 - v, u)."""
    for _ in range(degrees // 90):
        x0, y0, x1, y1 = box
        box = (1 - y1, x0, 1 - y0, x1)
    return box


def assert_words_in_blocks(blocks: Sequence[Block], words: Sequence[Word], degrees: int) -> None:
    """Each drawn word the engine read lies inside the box of its block and of its line
    (and most words were read)."""
    read = 0
    for token, box in words:
        expected = turned(box, degrees)
        holders = [b for b in blocks if token in b.text.split()]
        if not holders:
            continue
        read += 1
        assert any(inside(expected, b.bbox, TOLERANCE) for b in holders), (token, expected, holders)
        lines = [ln for b in holders for ln in b.lines if token in ln.text.split()]
        assert any(inside(expected, ln.bbox, TOLERANCE) for ln in lines), (token, expected, lines)
        for block in holders:
            assert all(inside(ln.bbox, block.bbox, 1e-4) for ln in block.lines if ln.bbox)
    assert read >= 0.8 * len(words), f"only {read} of {len(words)} words read"


@pytest.fixture(scope="module")
def embedded() -> EmbeddedEngine:
    return EmbeddedEngine()


@pytest.mark.parametrize("degrees", [0, 90, 180])
def test_embedded_words_lie_in_their_blocks_on_the_page_as_sent(
    embedded: EmbeddedEngine, degrees: int
) -> None:
    page, words = draw_page()
    sent = page.rotate(-degrees, expand=True) if degrees else page
    result = embedded.recognize(sent)
    assert result.rotation == (360 - degrees) % 360
    assert_words_in_blocks(result.blocks, words, degrees)


def test_embedded_blocks_are_the_text_in_reading_order(embedded: EmbeddedEngine) -> None:
    page, _ = draw_page()
    result = embedded.recognize(page)
    assert "\n\n".join(block.text for block in result.blocks) == result.text
    labels = [block.label for block in result.blocks]
    assert labels[0] is BlockLabel.PAGE_HEADER and labels[-1] is BlockLabel.PAGE_FOOTER
    assert labels[1] is BlockLabel.SECTION_HEADER, "the large title"
    assert labels[2:-1] == [BlockLabel.TEXT] * len(PARAGRAPHS)
    tops = [block.bbox[1] for block in result.blocks if block.bbox]
    assert tops == sorted(tops), "one column: reading order is top to bottom"
    for block in result.blocks:
        assert block.confidence is not None and 0.5 <= block.confidence <= 1.0
        assert all(line.confidence is not None for line in block.lines)


def test_the_embedded_engine_replies_with_its_blocks(embedded: EmbeddedEngine) -> None:
    page, words = draw_page()
    request = PageRequest(image=encode_image(page, "raw"))
    reply = asyncio.run(embedded.infer(request))
    assert reply.blocks and "\n\n".join(b.text for b in reply.blocks) == reply.text
    assert_words_in_blocks(reply.blocks, words, 0)


needs_tesseract = pytest.mark.skipif(
    shutil.which("tesseract") is None, reason="the tesseract command is not installed"
)


@needs_tesseract
def test_tesseract_words_lines_and_blocks_hold_the_drawn_words() -> None:
    page, words = draw_page()
    reply = asyncio.run(TesseractEngine().infer(PageRequest(image=encode_image(page, "raw"))))
    assert reply.blocks and "\n\n".join(b.text for b in reply.blocks) == reply.text
    assert_words_in_blocks(reply.blocks, words, 0)
    counts = Counter(token for token, _ in words)
    drawn = {token: box for token, box in words if counts[token] == 1}
    matched = 0
    for block in reply.blocks:
        for line in block.lines:
            assert line.words and line.text == " ".join(w.text for w in line.words)
            for word in line.words:
                assert inside(word.bbox, line.bbox, 1e-4)  # type: ignore[arg-type]
                assert word.confidence is not None and 0 <= word.confidence <= 1
                if word.text in drawn:
                    matched += 1
                    assert inside(drawn[word.text], word.bbox, TOLERANCE), word
                    assert inside(word.bbox, drawn[word.text], TOLERANCE), word  # type: ignore[arg-type]
    assert matched >= 0.8 * len(words)


@needs_tesseract
def test_tesseract_text_from_tsv_is_its_plain_text_output() -> None:
    """One TSV run gives the very text a plain-text run gives (so no second run)."""
    page, _ = draw_page()
    data = page_file_bytes(encode_image(page, "raw"))
    plain = subprocess.run(
        ["tesseract", "stdin", "stdout", "--psm", "3"], input=data, capture_output=True, check=True
    )
    expected = plain.stdout.decode().replace("\f", "").strip()
    assert TesseractEngine().run(data) == expected


def test_tesseract_tsv_rebuilds_paragraphs_and_lists() -> None:
    tsv = "\n".join(
        [
            "level\tpage_num\tblock_num\tpar_num\tline_num\tword_num\tleft\ttop\twidth\theight\tconf\ttext",
            "1\t1\t0\t0\t0\t0\t0\t0\t200\t100\t-1\t",
            "2\t1\t1\t0\t0\t0\t10\t10\t100\t40\t-1\t",
            "3\t1\t1\t1\t0\t0\t10\t10\t100\t40\t-1\t",
            "4\t1\t1\t1\t1\t0\t10\t10\t100\t15\t-1\t",
            "5\t1\t1\t1\t1\t1\t10\t10\t40\t15\t90\tHello",
            "5\t1\t1\t1\t1\t2\t60\t10\t50\t15\t80\tworld",
            "4\t1\t1\t1\t2\t0\t10\t30\t60\t15\t-1\t",
            "5\t1\t1\t1\t2\t1\t10\t30\t60\t15\t70\tagain",
            "3\t1\t1\t2\t0\t0\t10\t60\t100\t20\t-1\t",
            "4\t1\t1\t2\t1\t0\t10\t60\t100\t20\t-1\t",
            "5\t1\t1\t2\t1\t1\t10\t60\t10\t20\t95\t-",
            "5\t1\t1\t2\t1\t2\t30\t60\t50\t20\t-1\t ",
            "5\t1\t1\t2\t1\t3\t30\t60\t50\t20\t85\titem",
        ]
    )
    page = parse_tsv(tsv)
    assert page.text == "Hello world\nagain\n\n- item"
    first, second = page.blocks
    assert first.label is BlockLabel.TEXT and second.label is BlockLabel.LIST_ITEM
    assert first.lines[0].words[1].bbox == (0.3, 0.1, 0.55, 0.25)
    assert first.lines[0].words[1].confidence == 0.8
    assert second.lines[0].words[1].confidence == 0.85, "an empty word is dropped"
    assert first.bbox == (0.05, 0.1, 0.55, 0.45)
    with pytest.raises(EngineError):
        parse_tsv("Hello world")
