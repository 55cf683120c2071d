"""Reading order of the embedded engine on printed pages with reading-order ground truth
(``tests/data/reading_order``, OCR-D PAGE XML): two-column lexicon pages with a running
head and a figure caption inside a column, and a book page with a page number and
footnotes.

The ground truth gives each region's box and place in the reading order. A region's place
in our output is the first line read whose centre lies in its box, which needs no correct
recognition (the lexicon is in Fraktur); on the Antiqua page the regions' first three words
are also looked up in the text. Either way the share of region pairs read in the ground
truth's order must be high.
"""

from __future__ import annotations

import itertools
import json
import re
from functools import cache
from pathlib import Path

import pytest
from PIL import Image

from ocrflow.engines.embedded import EmbeddedEngine, OcrText
from ocrflow.types import Block, BlockLabel

PAGES = Path(__file__).resolve().parents[2] / "data" / "reading_order"
FURNITURE = {"header", "page-number"}
FURNITURE_LABELS = {BlockLabel.PAGE_HEADER, BlockLabel.PAGE_FOOTER}
#: Pages read in the tests (the bench reads them all).
LEXICON = ["ruempler_gartenbau_1882_0014", "ruempler_gartenbau_1882_0018"]
BOOK = "bebel_frau_1879_0176"
HEADED = "hilbert_zahlkoerper_1897_0379"


@cache
def engine() -> EmbeddedEngine:
    """One engine for the module (the models load once)."""
    return EmbeddedEngine()


@cache
def read(name: str) -> tuple[OcrText, tuple[int, int]]:
    """The page read by the embedded engine, and its size."""
    image = Image.open(PAGES / f"{name}.jpg").convert("RGB")
    return engine().recognize(image), image.size


def regions(name: str) -> list[dict]:
    """Ground-truth regions in reading order: type, box (pixels), text."""
    return json.loads((PAGES / f"{name}.regions.json").read_text())


def centres(blocks: tuple[Block, ...], size: tuple[int, int]) -> list[tuple[Block, float, float]]:
    """Every line of every block, in reading order, with its centre in pixels."""
    width, height = size
    return [
        (block, (x0 + x1) / 2 * width, (y0 + y1) / 2 * height)
        for block in blocks
        for line in block.lines
        for x0, y0, x1, y1 in [line.bbox]
    ]


def inside(region: dict, x: float, y: float) -> bool:
    """Whether the point lies in the region's box."""
    x0, y0, x1, y1 = region["box"]
    return x0 <= x <= x1 and y0 <= y <= y1


def pair_agreement(places: dict[int, int], truth: list[dict]) -> float:
    """Share of pairs of found regions in the ground truth's order; captions (read where
    they stand in the ground truth, after their paragraph here) and pairs of running-head
    regions (one line: number and title) left out."""
    pairs = [
        (a, b)
        for a, b in itertools.combinations(sorted(places), 2)
        if "caption" not in (truth[a]["type"], truth[b]["type"])
        and not {truth[a]["type"], truth[b]["type"]} <= FURNITURE
    ]
    assert len(pairs) >= 10, "too few regions found to judge the order"
    return sum(places[a] < places[b] for a, b in pairs) / len(pairs)


def region_places(name: str) -> tuple[dict[int, int], list[dict]]:
    """Each ground-truth region's place in our reading order (first line read in it)."""
    result, size = read(name)
    truth = regions(name)
    places: dict[int, int] = {}
    for position, (_, x, y) in enumerate(centres(result.blocks, size)):
        for index, region in enumerate(truth):
            if inside(region, x, y):
                places.setdefault(index, position)
    return places, truth


@pytest.mark.parametrize("name", [*LEXICON, BOOK])
def test_regions_are_read_in_the_ground_truths_order(name: str) -> None:
    places, truth = region_places(name)
    assert len(places) >= 0.8 * len(truth)
    assert pair_agreement(places, truth) >= 0.9


def normalised(text: str) -> str:
    """Lower case letters and digits, one space apart."""
    return " ".join(re.findall(r"\w+", text.lower()))


def test_first_words_of_the_paragraphs_come_in_order() -> None:
    """The first three words of each ground-truth region, found in the page text, come in
    the ground truth's order (most are found: the book page is in Antiqua)."""
    result, _ = read(BOOK)
    text = normalised(result.text)
    truth = regions(BOOK)
    places = {}
    for index, region in enumerate(truth):
        words = normalised(region["text"]).split()[:3]
        if len(words) == 3 and (at := text.find(" ".join(words))) >= 0:
            places[index] = at
    assert len(places) >= 0.6 * len(truth)
    pairs = list(itertools.combinations(sorted(places), 2))
    assert sum(places[a] < places[b] for a, b in pairs) / len(pairs) >= 0.9


@pytest.mark.parametrize("name", [*LEXICON, BOOK, HEADED])
def test_running_heads_and_page_numbers_are_page_furniture(name: str) -> None:
    result, size = read(name)
    truth = regions(name)
    furniture = [r for r in truth if r["type"] in FURNITURE]
    body = [r for r in truth if r["type"] == "paragraph"]
    lines = centres(result.blocks, size)
    heads = [block.label for block, x, y in lines if any(inside(r, x, y) for r in furniture)]
    assert heads, "the running head was not read"
    assert all(label in FURNITURE_LABELS for label in heads)
    in_body = [block.label for block, x, y in lines if any(inside(r, x, y) for r in body)]
    assert sum(label in FURNITURE_LABELS for label in in_body) == 0
    # Read first: the running head is at the top of these pages.
    assert result.blocks[0].label == BlockLabel.PAGE_HEADER


def test_the_caption_in_a_column_follows_the_paragraph_the_figure_interrupts() -> None:
    """On the lexicon page the figure cuts an entry ("... buchtig-bogenförmige / Blätter.
    Der Anblick ..."); its caption is read after the entry's second half, not between."""
    places, truth = region_places("ruempler_gartenbau_1882_0018")
    caption = next(i for i, r in enumerate(truth) if r["type"] == "caption")
    before, after = caption - 1, caption + 1
    assert truth[after]["type"] == "paragraph"
    assert places[before] < places[after] < places[caption]
