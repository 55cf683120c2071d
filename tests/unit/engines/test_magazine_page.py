"""A magazine page drawn here, read by the whole embedded engine (pixels in, blocks out):
three ragged columns under a running head and a title, a pull quote across the first two
columns set flush with their left edge, a figure and its caption inside the third column
(in the column's own type), a page number at the foot. Every paragraph starts with its own
word, so the reading order can be checked paragraph by paragraph.

What must hold (issue 18): the columns are read down past the quote, which comes after the
paragraph it interrupts (not between the columns' halves); the caption comes after the
paragraph the figure interrupts, labelled caption; running head and page number are page
furniture.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest
from PIL import Image, ImageDraw, ImageFont

from ocrflow.engines.embedded import EmbeddedEngine
from ocrflow.types import Block, BlockLabel

WIDTH, HEIGHT, MARGIN, GUTTER, COLUMNS, LEADING = 1700, 2200, 110, 50, 3, 40
COLUMN = (WIDTH - 2 * MARGIN - (COLUMNS - 1) * GUTTER) // COLUMNS
QUOTE_TOP, QUOTE_BOTTOM = 1000, 1180
FIGURE_TOP, FIGURE_BOTTOM = 1350, 1650
FIRST_WORDS = [
    "Harbour",
    "Meadow",
    "Lantern",
    "Orchard",
    "Chapel",
    "Valley",
    "Forest",
    "Island",
    "Railway",
    "Library",
    "Factory",
    "Mountain",
]
VOCABULARY = [
    "river",
    "market",
    "winter",
    "garden",
    "letter",
    "station",
    "bridge",
    "morning",
    "harvest",
    "council",
    "village",
    "teacher",
    "window",
    "kitchen",
    "history",
    "evening",
    "journey",
    "railway",
    "mountain",
    "summer",
    "library",
    "factory",
    "meadow",
    "orchard",
    "harbour",
    "lantern",
    "chapel",
    "valley",
    "forest",
    "island",
]
QUOTE = ("\u201cThe river remembers every market", "that ever stood upon its banks.\u201d")
CAPTION = "Figure 1. The old harbour at dawn."


@dataclass(frozen=True)
class Page:
    image: Image.Image
    #: The first words of the paragraphs, in reading order.
    paragraphs: list[str]


def _magazine_page() -> Page:
    rng = random.Random(7)
    body, small = ImageFont.load_default(size=30), ImageFont.load_default(size=26)
    image = Image.new("RGB", (WIDTH, HEIGHT), "white")
    draw = ImageDraw.Draw(image)
    draw.text((MARGIN, 50), "THE OCRFLOW REVIEW", font=small, fill="black")
    draw.text((WIDTH - MARGIN - 300, 50), "NOVEMBER 2026", font=small, fill="black")
    draw.line((MARGIN, 95, WIDTH - MARGIN, 95), fill="black", width=2)
    title = ImageFont.load_default(size=64)
    draw.text((MARGIN, 130), "Rivers and markets of the north", font=title, fill="black")

    def wrapped(text: str) -> list[str]:
        lines, current = [], ""
        for word in text.split():
            longer = f"{current} {word}".strip()
            if draw.textlength(longer, font=body) <= COLUMN:
                current = longer
            else:
                lines.append(current)
                current = word
        return [*lines, current]

    firsts = iter(FIRST_WORDS)
    order: list[str] = []
    for column in range(COLUMNS):
        x, y = MARGIN + column * (COLUMN + GUTTER), 260
        while y < HEIGHT - 200 and (first := next(firsts, None)) is not None:
            order.append(first)
            words = " ".join(rng.choice(VOCABULARY) for _ in range(38))
            for line in wrapped(f"{first} {words}."):
                if column < 2 and QUOTE_TOP - LEADING < y < QUOTE_BOTTOM:
                    y = QUOTE_BOTTOM + 20  # the column goes on under the quote
                if column == 2 and FIGURE_TOP - LEADING < y < FIGURE_BOTTOM + 90:
                    y = FIGURE_BOTTOM + 110  # ... and under the figure and its caption
                if y > HEIGHT - 200:
                    break
                draw.text((x, y), line, font=body, fill="black")
                y += LEADING
            y += 30
    quote = ImageFont.load_default(size=44)
    right = MARGIN + 2 * COLUMN + GUTTER
    draw.line((MARGIN, QUOTE_TOP, right, QUOTE_TOP), fill="black", width=3)
    draw.text((MARGIN + 20, QUOTE_TOP + 25), QUOTE[0], font=quote, fill="black")
    draw.text((MARGIN + 20, QUOTE_TOP + 90), QUOTE[1], font=quote, fill="black")
    draw.line((MARGIN, QUOTE_BOTTOM, right, QUOTE_BOTTOM), fill="black", width=3)
    figure_x = MARGIN + 2 * (COLUMN + GUTTER)
    draw.rectangle((figure_x, FIGURE_TOP, figure_x + COLUMN, FIGURE_BOTTOM), fill=(170, 170, 170))
    draw.text((figure_x, FIGURE_BOTTOM + 15), CAPTION, font=small, fill="black")
    draw.text((WIDTH // 2 - 20, HEIGHT - 110), "42", font=small, fill="black")
    return Page(image, order)


@pytest.fixture(scope="module")
def read() -> tuple[Page, list[Block]]:
    page = _magazine_page()
    result = EmbeddedEngine(threads=2).recognize(page.image)
    return page, list(result.blocks)


def _index(blocks: list[Block], start: str) -> int:
    found = [i for i, block in enumerate(blocks) if (block.text or "").startswith(start)]
    assert len(found) == 1, (start, [b.text for b in blocks])
    return found[0]


def test_paragraphs_are_read_column_by_column(read: tuple[Page, list[Block]]) -> None:
    page, blocks = read
    starts = [
        (block.text or "").split()[0]
        for block in blocks
        if block.text and block.text.split()[0] in FIRST_WORDS
    ]
    assert starts == page.paragraphs
    assert len(starts) == len(FIRST_WORDS)


def test_the_pull_quote_follows_the_paragraph_it_interrupts(
    read: tuple[Page, list[Block]],
) -> None:
    _, blocks = read
    quotes = [i for i, block in enumerate(blocks) if "The river remembers" in (block.text or "")]
    assert len(quotes) == 1
    quote = quotes[0]
    # Meadow's paragraph runs on under the quote ("meadow winter ..."): then the quote,
    # then the column's next paragraph, and only then the second column.
    assert _index(blocks, "Meadow") < _index(blocks, "meadow") == quote - 1
    assert quote + 1 == _index(blocks, "Lantern") < _index(blocks, "Chapel")
    assert "ever stood upon its banks" in (blocks[quote].text or "")
    assert blocks[quote].label == BlockLabel.TEXT


def test_the_caption_follows_the_paragraph_the_figure_interrupts(
    read: tuple[Page, list[Block]],
) -> None:
    _, blocks = read
    caption = _index(blocks, "Figure 1.")
    assert blocks[caption].label == BlockLabel.CAPTION
    assert _index(blocks, "Factory") < caption - 1 < caption < _index(blocks, "Mountain")
    # The block before the caption is the Factory paragraph going on under the figure.
    assert (blocks[caption - 1].text or "")[0].islower()


def test_running_head_and_page_number_are_page_furniture(
    read: tuple[Page, list[Block]],
) -> None:
    _, blocks = read
    heads = [b for b in blocks if b.label == BlockLabel.PAGE_HEADER]
    assert {b.text for b in heads} == {"THE OCRFLOW REVIEW", "NOVEMBER 2026"}
    assert blocks[-1].label == BlockLabel.PAGE_FOOTER and blocks[-1].text == "42"
    assert blocks[len(heads)].text == "Rivers and markets of the north"
