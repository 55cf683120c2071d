"""Tesseract as an engine: the Debian ``tesseract`` command, one process per page.

Selectable instead of the default embedded engine (``--engine tesseract``). Pages go to the
process on stdin as uncompressed PNM (raw pixels plus a short header), so nothing is
encoded. It answers in TSV (``tesseract_tsv.py``): the text, with paragraphs apart by
blank lines as its plain-text output has them, plus word and line boxes, in one run.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import time
from dataclasses import replace

from PIL import Image

from ocrflow.engines.tesseract_osd import (
    is_askew,
    is_unsure,
    levelled_pnm,
    mean_confidence,
    orientation_pnm,
    parse_orientation,
    sideways_turn,
    turned_pnm,
    unlevelled,
)
from ocrflow.engines.tesseract_tsv import TsvPage, parse_tsv
from ocrflow.errors import ConfigError, EngineError, EngineRejected, EngineUnavailable
from ocrflow.types import EngineReply, PageImage, PageRequest, unturn_blocks

_LANGUAGES = re.compile(r"^[A-Za-z_]+(\+[A-Za-z_]+)*$")
_INSTALL_HINT = "install it with: apt-get install tesseract-ocr (plus tesseract-ocr-LANG packs)"


class TesseractEngine:
    """Runs ``tesseract`` per page with a timeout; ``languages`` as in ``-l`` ("eng+deu").

    ``psm`` is Tesseract's page segmentation mode: 3 (its default, no orientation check) or
    1 (also detects rotated pages, about 0.1 s a page more). ``threads`` caps OpenMP threads
    per process; 1 is fastest when pages run side by side. ``detect_rotation``: a page read
    unsure gets Tesseract's orientation check, and is read again turned when that reads
    surer; ``level_skewed``: a page read askew is read again level, kept when surer
    (``tesseract_osd.py``; an upright, level page costs nothing more).
    """

    name = "tesseract"
    #: Tesseract is trained on 300-dpi print (its own recommendation); a scan is read at
    #: its own resolution up to 400 dpi, as OCRmyPDF does (``render/resolution.py``).
    reading_dpi = 300.0
    max_scan_dpi = 400.0
    image_encoding = "raw"

    def __init__(
        self,
        *,
        languages: str = "eng",
        psm: int = 3,
        threads: int = 1,
        timeout_s: float = 120.0,
        max_parallel: int = 1,
        command: str = "tesseract",
        detect_rotation: bool = True,
        level_skewed: bool = True,
    ) -> None:
        if not _LANGUAGES.match(languages):
            raise ConfigError(f"tesseract languages {languages!r} are not like 'eng+deu'")
        self.languages = languages
        self.psm = psm
        self.threads = threads
        self.timeout_s = timeout_s
        self.command = command
        self.detect_rotation = detect_rotation
        self.level_skewed = level_skewed
        self._slots = asyncio.Semaphore(max_parallel)

    async def infer(self, request: PageRequest) -> EngineReply:
        """OCR one page in a worker thread (the subprocess call blocks)."""
        data = page_file_bytes(request.image)
        started = time.perf_counter()
        async with self._slots:
            page = await asyncio.to_thread(self.read_upright, request.image, data)
        return EngineReply(
            text=page.text,
            latency_s=time.perf_counter() - started,
            rotation=page.rotation,
            engine="tesseract",
            blocks=page.blocks,
            attributes={"skew": page.skew},
        )

    async def aclose(self) -> None:
        """Nothing to release: each page is its own process."""

    def recognize(self, image: Image.Image) -> str:
        """OCR a PIL image synchronously (benchmarks, tests, scripts)."""
        rgb = image.convert("RGB")
        return self.run(_pnm(rgb.tobytes(), rgb.width, rgb.height, "RGB"))

    def run(self, data: bytes) -> str:
        """OCR an image file's bytes (PNM, PNG, JPEG, TIFF) and return the page text."""
        return self.read(data).text

    def read(self, data: bytes, dpi: float | None = None) -> TsvPage:
        """OCR an image file's bytes: the page text and its blocks (paragraphs, with line
        and word boxes in 0..1 of the image and confidences). ``dpi``: the image's
        resolution, where known; Tesseract guesses it from the text otherwise, and its
        layout analysis follows the guess (a 300-dpi form guessed at 276: 28 line numbers
        and a column of codes left out, which OCRmyPDF, saying 300, kept)."""
        options = ["-l", self.languages, "--psm", str(self.psm)]
        if dpi is not None and 0 < dpi < 10_000:
            options += ["--dpi", str(round(dpi))]
        options.append("tsv")
        return parse_tsv(self._output(data, options))

    def _output(self, data: bytes, options: list[str]) -> str:
        """What ``tesseract stdin stdout *options`` prints for ``data``."""
        try:
            done = subprocess.run(
                [self.command, "stdin", "stdout", *options],
                input=data,
                capture_output=True,
                timeout=self.timeout_s,
                env={**os.environ, "OMP_THREAD_LIMIT": str(self.threads)},
                check=False,
            )
        except FileNotFoundError as exc:
            raise EngineError(f"{self.command!r} not found; {_INSTALL_HINT}") from exc
        except subprocess.TimeoutExpired as exc:
            raise EngineUnavailable(
                f"tesseract took over {self.timeout_s:.0f} s", reason="timeout"
            ) from exc
        if done.returncode != 0:
            detail = done.stderr.decode(errors="replace").strip()[-500:]
            raise EngineError(f"tesseract exited with {done.returncode}: {detail}")
        return done.stdout.decode("utf-8", errors="replace")

    def read_upright(self, image: PageImage, data: bytes) -> TsvPage:
        """``read``; then a page read unsure gets its orientation checked and is read again
        turned, and a page read askew is read again level, each kept when Tesseract is
        surer of it (``tesseract_osd.py``). Boxes on the page as given; ``rotation`` the
        turn, ``skew`` as measured."""
        page = self.read(data, image.dpi)
        unsure = is_unsure(page)
        if self.detect_rotation and not unsure:
            sideways = sideways_turn(page, image.width, image.height)
            if sideways:  # read right already, its boxes on the page as given
                return replace(page, rotation=sideways)
        turn = self._turn(image) if self.detect_rotation and unsure else 0
        if turn:
            turned = self.read(turned_pnm(image, turn), image.dpi)
            if mean_confidence(turned) > mean_confidence(page):
                page = turned
            else:
                turn = 0
        if self.level_skewed and is_askew(page):
            level = self.read(levelled_pnm(image, turn, page.skew), image.dpi)
            if mean_confidence(level) > mean_confidence(page):
                size = (image.height, image.width) if turn % 180 else (image.width, image.height)
                page = unlevelled(level, page.skew, *size)
        if turn:
            page = replace(page, blocks=unturn_blocks(page.blocks, turn), rotation=turn)
        return page

    def _turn(self, image: PageImage) -> int:
        """Degrees clockwise Tesseract's orientation check would turn the page; 0 when it
        is upright, unsure, or the check cannot run (no ``osd.traineddata``)."""
        try:
            # The orientation model by name: with the page's languages instead, Tesseract
            # named a wrong turn, sure of it (a 180-degree page read as 90, confidence 68).
            check = ["-l", "osd", "--psm", "0"]
            return parse_orientation(self._output(orientation_pnm(image), check))
        except EngineError:
            return 0


def page_file_bytes(image: PageImage) -> bytes:
    """Bytes Tesseract can read: PNM for raw pixels, the file itself otherwise."""
    if image.encoding != "raw":
        return image.data
    if image.mode not in {"RGB", "L"}:
        raise EngineRejected(f"raw page image mode {image.mode!r} is not RGB or L")
    return _pnm(image.data, image.width, image.height, image.mode)


def _pnm(pixels: bytes, width: int, height: int, mode: str) -> bytes:
    channels = 3 if mode == "RGB" else 1
    if len(pixels) != width * height * channels or not pixels:
        raise EngineRejected(f"raw {mode} page image of {width}x{height} has {len(pixels)} bytes")
    magic = b"P6" if channels == 3 else b"P5"
    return b"%s\n%d %d\n255\n" % (magic, width, height) + pixels
