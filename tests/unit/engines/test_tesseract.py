"""The Tesseract engine: real runs when the binary is installed, failures always."""

from __future__ import annotations

import asyncio
import re
import shutil
from pathlib import Path

import pytest
from PIL import Image

from ocrflow.engines.base import Engine
from ocrflow.engines.tesseract import TesseractEngine, page_file_bytes
from ocrflow.errors import ConfigError, EngineError, EngineRejected, EngineUnavailable
from ocrflow.types import PageImage, PageRequest

needs_tesseract = pytest.mark.skipif(
    shutil.which("tesseract") is None,
    reason="[needs tesseract] the tesseract binary is not installed (scripts/system-deps.sh)",
)


@pytest.fixture(scope="module")
def phototest(corpus: Path) -> Image.Image:
    with Image.open(corpus / "images" / "tesseract__phototest.tif") as image:
        return image.convert("RGB")


def test_engine_honours_the_protocol() -> None:
    engine = TesseractEngine(languages="eng+deu", max_parallel=2)
    assert isinstance(engine, Engine)
    assert (engine.name, engine.image_encoding) == ("tesseract", "raw")


@needs_tesseract
@pytest.mark.parametrize("mode", ["RGB", "L"])
def test_infer_reads_raw_pixels(phototest: Image.Image, corpus: Path, mode: str) -> None:
    pixels = phototest.convert(mode)
    image = PageImage(pixels.tobytes(), pixels.width, pixels.height, "raw", mode)
    reply = asyncio.run(TesseractEngine().infer(PageRequest(image=image)))
    truth = (corpus / "groundtruth" / "tesseract__phototest.gold.txt").read_text()
    assert reply.engine == "tesseract"
    assert reply.text.split() == truth.split()  # Tesseract's own test page: exact
    assert "\n\n" in reply.text  # its paragraphs survive


@needs_tesseract
def test_encoded_files_go_through_unchanged(corpus: Path) -> None:
    data = (corpus / "images" / "tesseract__phototest.tif").read_bytes()
    text = TesseractEngine().run(page_file_bytes(PageImage(data, 640, 480, "tiff")))
    assert text.startswith("This is a lot of 12 point text")


def test_missing_binary_says_how_to_install() -> None:
    engine = TesseractEngine(command="/nonexistent/tesseract")
    with pytest.raises(EngineError, match="apt-get install tesseract-ocr"):
        engine.recognize(Image.new("L", (32, 32), 255))


def fake_tesseract(folder: Path, script: str) -> str:
    """An executable standing in for ``tesseract``."""
    path = folder / "tesseract"
    path.write_text("#!/bin/sh\n" + script + "\n")
    path.chmod(0o755)
    return str(path)


def test_a_hung_process_times_out_as_unavailable(tmp_path: Path) -> None:
    engine = TesseractEngine(command=fake_tesseract(tmp_path, "exec sleep 30"), timeout_s=0.3)
    with pytest.raises(EngineUnavailable) as caught:
        engine.run(b"P5\n1 1\n255\n\x00")
    assert caught.value.reason == "timeout"


def test_a_failing_process_is_an_engine_error(tmp_path: Path) -> None:
    command = fake_tesseract(tmp_path, "echo 'Failed loading language xyz' >&2; exit 1")
    with pytest.raises(EngineError, match="Failed loading language xyz"):
        TesseractEngine(command=command).run(b"P5\n1 1\n255\n\x00")


def test_languages_are_validated() -> None:
    with pytest.raises(ConfigError):
        TesseractEngine(languages="eng; rm -rf /")


@pytest.mark.parametrize(
    "image",
    [PageImage(b"\x00" * 10, 4, 4, "raw", "RGB"), PageImage(b"\x00" * 64, 4, 4, "raw", "CMYK")],
)
def test_bad_raw_images_are_rejected(image: PageImage) -> None:
    with pytest.raises(EngineRejected):
        page_file_bytes(image)


def test_raw_pixels_become_pnm() -> None:
    data = page_file_bytes(PageImage(b"\x01\x02\x03\x04", 2, 2, "raw", "L"))
    assert data == b"P5\n2 2\n255\n\x01\x02\x03\x04"


def test_the_page_s_resolution_is_passed_on(tmp_path: Path) -> None:
    log = tmp_path / "args"
    header = "level\\tpage_num\\tblock_num\\tpar_num\\tline_num\\tword_num\\tleft\\ttop"
    script = f'echo "$@" >> {log}; printf "{header}\\n"'
    engine = TesseractEngine(command=fake_tesseract(tmp_path, script))
    engine.read(b"P5\n1 1\n255\n\x00", dpi=299.6)
    engine.read(b"P5\n1 1\n255\n\x00")
    said, guessed = log.read_text().splitlines()
    assert "--dpi 300" in said
    assert "--dpi" not in guessed  # unknown: Tesseract guesses, as before


@needs_tesseract
def test_a_form_read_at_its_resolution_keeps_its_line_numbers(corpus: Path) -> None:
    # Guessed from the text (276 dpi for this 300-dpi scan), Tesseract's layout analysis
    # left out the form's column of line numbers; OCRmyPDF, saying 300, kept them.
    from .test_line_detection import scanned

    scan = scanned(corpus / "pdfs" / "pdfjs__160F-2019.pdf").convert("L")
    data = page_file_bytes(PageImage(scan.tobytes(), scan.width, scan.height, "raw", "L"))
    engine = TesseractEngine()
    said, guessed = engine.read(data, dpi=300).text, engine.read(data).text
    numbered = [len(re.findall(r"(?m)^\d{1,2}\b", text)) for text in (said, guessed)]
    assert numbered[0] >= 25 > 2 * numbered[1]
