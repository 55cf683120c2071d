"""Pages Tesseract finds turned or askew, read again upright and level.

Turned: its orientation check (``--psm 0``), run only on a page whose plain reading came
out unsure, and the page turned before it is read again. A sideways page Tesseract read
with confidence, its lines running down or up the page, needs neither: the order of its
words tells the turn (``sideways_turn``). (Read unsure, such columns are often a turned
page read backwards, glyph by glyph, and go to the check.)

Tesseract's default page segmentation (``--psm 3``) reads a sideways or upside-down page
as garbage. Checking every page's orientation (``--psm 0``, OCRmyPDF's ``--rotate-pages``)
costs a second run a page; a page read with confidence is upright, so only a page whose
words came out unsure is checked, and read again turned when the check says so. The
turned reading is kept only when Tesseract is surer of it.

Askew: Tesseract reads a page a degree or two askew with more errors (the corpus's skewed
brochure: CER 0.046 against 0.009 level; OCRmyPDF's ``--deskew`` levels the image first).
A page whose words measure ``LEVEL_SKEW`` or more askew (``TsvPage.skew``) is read again
turned level, and that reading kept when Tesseract is surer of it, its boxes moved back to
where the words are printed.
"""

from __future__ import annotations

import io
import math
import re
import unicodedata
from dataclasses import replace

from PIL import Image

from ocrflow.engines.tesseract_tsv import TsvPage
from ocrflow.types import BBox, PageImage, box_turned_about_centre, moved_blocks

#: Mean word confidence (0..100, weighted by word length) under which a reading is
#: checked for orientation: an upright page of print reads at 85-95; a sideways one at
#: 30-50 (measured on the corpus's turned scans).
UNSURE_CONFIDENCE = 60.0
#: Tesseract's own floor for trusting its orientation guess (OCRmyPDF's default, 14, is
#: stricter; the turned reading must also beat the plain one here).
MIN_ORIENTATION_CONFIDENCE = 1.0
#: The orientation check's input, longest side: it named the right turn of the corpus's
#: turned pages from 1200 to 2400 px; a table form's check took 0.80 s at 2000 px, 0.55 s
#: at 1400.
ORIENTATION_SIDE = 1600
#: Skew (degrees) from which a page is read again level, and past which the measure is more
#: likely a figure's slant than the page's. Under a degree Tesseract reads as well (a
#: 0.53-degree table form read again level came out no surer, at twice the time: 4.2 s a
#: reading).
LEVEL_SKEW = 1.0
MAX_SKEW = 10.0
_ROTATE = re.compile(r"^Rotate:\s*(\d+)", re.MULTILINE)
_CONFIDENCE = re.compile(r"^Orientation confidence:\s*([\d.]+)", re.MULTILINE)


def mean_confidence(page: TsvPage) -> float:
    """The page's word confidences (0..100) averaged by word length; 0.0 without words."""
    scored = [
        (word.confidence, len(word.text))
        for block in page.blocks
        for line in block.lines
        for word in line.words
        if word.confidence is not None
    ]
    total = sum(n for _, n in scored)
    return 100 * sum(c * n for c, n in scored) / total if total else 0.0


def is_unsure(page: TsvPage) -> bool:
    """Whether a reading may come from a turned page (see ``UNSURE_CONFIDENCE``)."""
    return mean_confidence(page) < UNSURE_CONFIDENCE


def sideways_turn(page: TsvPage, width: int, height: int) -> int:
    """Degrees clockwise (90 or 270) that turn upright a page Tesseract read sideways, from
    the ``width`` x ``height`` px page's lines of several words; 0 when most run across.

    Tesseract's default segmentation reads vertical lines of a sideways page as well as
    upright ones (confidence 95 on a page turned 90 degrees), so such a page never reads
    unsure; its text is right, but its words' boxes stand on end, and a text layer written
    across them is read by ``pdftotext`` one glyph column at a time. Columns of mostly
    Chinese or Japanese characters are taken for vertical writing, upright."""
    across = down = up = wide = 0
    for block in page.blocks:
        for line in block.lines:
            boxes = [word.bbox for word in line.words if word.bbox is not None]
            if len(boxes) < 2:
                continue
            (x0, y0), (x1, y1) = _centre(boxes[0]), _centre(boxes[-1])
            dx, dy = (x1 - x0) * width, (y1 - y0) * height
            text = "".join(word.text for word in line.words)
            if abs(dx) >= abs(dy):
                across += len(text)
                continue
            wide += sum(unicodedata.east_asian_width(c) in "WF" for c in text)
            if dy > 0:
                down += len(text)
            else:
                up += len(text)
    # Chinese and Japanese are also printed upright in columns read downwards.
    if down + up <= across or 2 * wide >= down + up:
        return 0
    # Lines read downwards: the print was turned a quarter clockwise, so a quarter back.
    return 270 if down >= up else 90


def _centre(box: BBox) -> tuple[float, float]:
    return (box[0] + box[2]) / 2, (box[1] + box[3]) / 2


def parse_orientation(osd: str) -> int:
    """Degrees clockwise to turn the page upright from ``tesseract --psm 0`` output; 0 when
    it is upright or Tesseract is unsure."""
    turn, confidence = _ROTATE.search(osd), _CONFIDENCE.search(osd)
    if turn is None or confidence is None:
        return 0
    if float(confidence.group(1)) < MIN_ORIENTATION_CONFIDENCE:
        return 0
    degrees = int(turn.group(1)) % 360
    return degrees if degrees in (90, 180, 270) else 0


def turned_pnm(image: PageImage, degrees: int) -> bytes:
    """``image`` (raw pixels or an image file) turned ``degrees`` clockwise, as PNM."""
    return _pnm(_pixels(image).rotate(-degrees, expand=True))


def is_askew(page: TsvPage) -> bool:
    """Whether a reading's page is worth reading again level (see the module docstring)."""
    return LEVEL_SKEW <= abs(page.skew) <= MAX_SKEW


def levelled_pnm(image: PageImage, turn: int, skew: float) -> bytes:
    """``image`` turned ``turn`` degrees clockwise, then ``skew`` degrees back to level
    (its lines ran down to the right by ``skew``), same size, as PNM."""
    pixels = _pixels(image)
    if turn:
        pixels = pixels.rotate(-turn, expand=True)
    white = 255 if pixels.mode == "L" else (255, 255, 255)
    level = pixels.rotate(skew, resample=Image.Resampling.BICUBIC, fillcolor=white)
    return _pnm(level)


def unlevelled(page: TsvPage, skew: float, width: int, height: int) -> TsvPage:
    """A reading of the levelled page with its boxes back where the words are printed on
    the ``width`` x ``height`` page, ``skew`` degrees askew: each box around its sloping
    words, as tall as their slope makes it (as the embedded engine's boxes are)."""
    angle = -math.radians(skew)
    rise = abs(math.sin(angle)) * width / height

    def back(box: BBox) -> BBox:
        sloping = box[3] - box[1] + (box[2] - box[0]) * rise
        return box_turned_about_centre(box, angle, width, height, sloping)

    return replace(page, blocks=moved_blocks(page.blocks, back), skew=skew)


def orientation_pnm(image: PageImage) -> bytes:
    """``image`` as the orientation check gets it: at most ``ORIENTATION_SIDE`` px on its
    longest side (the check needs no more, and costs less)."""
    pixels = _pixels(image)
    scale = ORIENTATION_SIDE / max(pixels.size)
    if scale < 1:
        size = (max(1, round(pixels.width * scale)), max(1, round(pixels.height * scale)))
        pixels = pixels.resize(size, Image.Resampling.BOX)
    return _pnm(pixels)


def _pixels(image: PageImage) -> Image.Image:
    if image.encoding == "raw":
        return Image.frombytes(image.mode, (image.width, image.height), image.data)
    with Image.open(io.BytesIO(image.data)) as opened:
        return opened.convert("RGB")


def _pnm(pixels: Image.Image) -> bytes:
    if pixels.mode not in ("RGB", "L"):
        pixels = pixels.convert("RGB")
    magic = b"P6" if pixels.mode == "RGB" else b"P5"
    return b"%s\n%d %d\n255\n" % (magic, pixels.width, pixels.height) + pixels.tobytes()
