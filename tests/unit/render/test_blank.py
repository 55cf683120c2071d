"""Blank-page detection on drawn pages and on the shared corpus scans."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pypdfium2 as pdfium
import pytest
from PIL import Image, ImageDraw, ImageFont

from ocrflow.render import blank
from ocrflow.render.blank import is_blank_image
from tests.needs import CORPUS as SHARED_CORPUS
from tests.needs import need_corpus_file

CORPUS = SHARED_CORPUS
WIDTH, HEIGHT = 996, 1288  # a letter page rendered at 1288 px on its long side
WHITE = (255, 255, 255)
YELLOWED = (235, 225, 190)


def paper(colour: tuple[int, int, int] = WHITE) -> Image.Image:
    return Image.new("RGB", (WIDTH, HEIGHT), colour)


def words(
    image: Image.Image,
    text: str = "Three short words",
    *,
    size: int = 14,
    at: tuple[int, int] = (300, 600),
    fill: tuple[int, int, int] = (0, 0, 0),
) -> Image.Image:
    ImageDraw.Draw(image).text(at, text, fill=fill, font=ImageFont.load_default(size=size))
    return image


def noise(image: Image.Image, sigma: float) -> Image.Image:
    rng = np.random.default_rng(1)
    pixels = np.asarray(image).astype(np.int16) + rng.normal(0, sigma, (HEIGHT, WIDTH, 1))
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))


def dust(image: Image.Image, count: int, size: int) -> Image.Image:
    rng = np.random.default_rng(2)
    pixels = np.asarray(image).copy()
    ys = rng.integers(0, HEIGHT - size, count)
    xs = rng.integers(0, WIDTH - size, count)
    for y, x in zip(ys, xs, strict=True):
        pixels[y : y + size, x : x + size] = 0
    return Image.fromarray(pixels)


def frame(image: Image.Image) -> Image.Image:
    ImageDraw.Draw(image).rectangle([20, 20, WIDTH - 20, HEIGHT - 20], outline=(0, 0, 0), width=3)
    return image


def edge_shadow(image: Image.Image) -> Image.Image:
    pixels = np.asarray(image).astype(np.float32)
    pixels[:, :60] *= np.linspace(0.25, 1.0, 60)[None, :, None]
    return Image.fromarray(pixels.astype(np.uint8))


def scanner_edge(image: Image.Image) -> Image.Image:
    pixels = np.asarray(image).copy()
    pixels[:, -25:] = 20
    pixels[-25:, :] = 20
    return Image.fromarray(pixels)


def gradient(image: Image.Image) -> Image.Image:
    pixels = np.asarray(image).astype(np.float32) * np.linspace(1.0, 0.7, HEIGHT)[:, None, None]
    return Image.fromarray(pixels.astype(np.uint8))


BLANK: dict[str, Callable[[], Image.Image]] = {
    "white": paper,
    "grey": lambda: paper((200, 200, 200)),
    "yellowed": lambda: paper(YELLOWED),
    "scanner_noise": lambda: noise(paper(), 8),
    "heavy_noise_on_grey": lambda: noise(paper((235, 235, 235)), 20),
    "faint_speckle": lambda: dust(paper(), 400, 1),
    "dust_spots": lambda: dust(paper(), 60, 3),
    "thin_border": lambda: frame(paper()),
    "edge_shadow": lambda: edge_shadow(paper()),
    "scanner_edge": lambda: scanner_edge(paper()),
    "lighting_gradient": lambda: gradient(paper()),
    "border_shadow_and_noise": lambda: noise(frame(edge_shadow(paper())), 6),
}

CONTENT: dict[str, Callable[[], Image.Image]] = {
    "three_words": lambda: words(paper(), size=18),
    "three_small_words": lambda: words(paper(), size=12),
    "two_grey_words": lambda: words(paper(), "Two words", fill=(110, 110, 110)),
    "words_with_noise": lambda: noise(words(paper()), 10),
    "words_on_yellowed_paper": lambda: words(paper(YELLOWED)),
    "words_beside_a_shadow": lambda: edge_shadow(words(paper())),
    "words_in_a_border": lambda: frame(words(paper())),
    "footer_only": lambda: words(paper(), "Page 3 of 10", at=(450, 1220)),
    "red_words": lambda: words(paper(), "Red ink words", fill=(220, 0, 0)),
    "yellow_words": lambda: words(paper(), "Yellow words", size=16, fill=(230, 200, 0)),
}


@pytest.mark.parametrize("name", sorted(BLANK))
def test_paper_noise_and_borders_are_blank(name: str) -> None:
    assert is_blank_image(BLANK[name]())


@pytest.mark.parametrize("name", sorted(CONTENT))
def test_a_few_words_are_not_blank(name: str) -> None:
    assert not is_blank_image(CONTENT[name]())


@pytest.mark.parametrize("mode", ["1", "L", "P", "RGBA", "LA"])
def test_any_image_mode_is_accepted(mode: str) -> None:
    assert is_blank_image(Image.new(mode, (400, 520), 0 if mode in ("RGBA", "LA") else 255))
    page = words(paper()).convert(mode)
    assert not is_blank_image(page)


def test_tiny_and_strip_images() -> None:
    assert is_blank_image(Image.new("L", (8, 8), 255))
    strip = Image.new("RGB", (1200, 40), WHITE)
    ImageDraw.Draw(strip).text(
        (10, 8), "One line of text", fill=(0, 0, 0), font=ImageFont.load_default(size=20)
    )
    assert not is_blank_image(strip)


@pytest.mark.parametrize("scale", [1, 3, 7])
def test_the_blank_test_works_on_a_copy_of_bounded_size(
    scale: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its cost must not grow with the page (a 300-dpi scan, a 600-dpi one): it looks at a
    # shrunken copy. Its speed is measured by bench/bench_blank.py, not here.
    looked_at: list[tuple[int, ...]] = []

    def recorded(image: Image.Image) -> np.ndarray:
        gray = shrink(image)
        looked_at.append(gray.shape)
        return gray

    shrink = blank._shrink
    monkeypatch.setattr(blank, "_shrink", recorded)
    size = (WIDTH * scale, HEIGHT * scale)
    written = noise(words(paper()), 6).resize(size, Image.Resampling.BILINEAR)
    empty = noise(paper(), 6).resize(size, Image.Resampling.BILINEAR)
    assert not is_blank_image(written) and is_blank_image(empty)
    assert looked_at and all(max(shape) <= 1.5 * blank.WORK_SIZE for shape in looked_at)


SCANS = ["images/" + p.name for p in sorted((CORPUS / "images").glob("*"))] + [
    "pdfs/ocrmypdf__linn.pdf",
    "pdfs/ocrmypdf__c02-22.pdf",
    "pdfs/olmocr__horribleocr.pdf",
    "pdfs/pdfjs__scan-bad.pdf",
    "pdfs/docling__ocr_test.pdf",
    "pdfs/unstructured__loremipsum-flat.pdf",
    "pdfs/pikepdf__ccitt-endofline-true.pdf",
    "pdfs/ocrmypdf__multipage.pdf",
]


def _load_scan(path: Path) -> Image.Image:
    if path.suffix != ".pdf":
        with Image.open(path) as opened:
            image = opened.convert("RGB")
        image.thumbnail((1288, 1288))
        return image
    doc = pdfium.PdfDocument(path)
    page = doc[0]
    width, height = page.get_size()
    image = page.render(scale=1288 / max(width, height)).to_pil()
    page.close()
    doc.close()
    return image


@pytest.mark.parametrize("name", SCANS)
def test_corpus_scans_are_not_blank(name: str) -> None:
    path = CORPUS / name
    need_corpus_file(path)
    assert not is_blank_image(_load_scan(path))
