"""Two-column pages as a scanned journal prints them, drawn with Pillow, with their text.

For the tests and benchmarks of reading columns (``tests/unit/engines/test_gutters.py``,
``bench/bench_layer_columns.py``): one 300-dpi letter page, two columns of 10-pt serif on
12-pt leading, ``gutter_pt`` points apart (LaTeX's two-column default is 10 pt),
paragraphs 6 pt apart, ragged right. The text is the left column, then the right, a
paragraph's lines one a line, columns a blank line apart.
"""

from __future__ import annotations

import random

from PIL import Image, ImageDraw, ImageFont

DPI = 300
#: Debian's fonts-liberation (scripts/system-deps.sh installs it for the tests).
FONT_FILE = "/usr/share/fonts/truetype/liberation/LiberationSerif-Regular.ttf"
#: The words the columns are made of (a common-word list: any text would do).
WORDS = (
    "the of and to in is that for it as was with be by on not this are or from at which but "
    "have an they were there been one all would when if so what more out up into can some "
    "them other than then only its time could these two may first new any now such like our "
    "over even most made after also did many before must through back years where much way "
    "well down should because each just those people how too little state good very make "
    "world still see own work long get here between both life being under never day same "
    "another know while last might great old year off come since against go came right used"
)


def pt(points: float) -> int:
    """Points at the page's resolution."""
    return round(points * DPI / 72)


def two_column_page(
    gutter_pt: float, seed: int = 1, font_file: str = FONT_FILE
) -> tuple[Image.Image, str]:
    """The page (grey) with its columns ``gutter_pt`` apart, and its text (module docstring).
    ``OSError`` when ``font_file`` cannot be read."""
    rng, vocabulary = random.Random(seed), WORDS.split()
    width, height, margin = pt(612), pt(792), pt(54)
    font = ImageFont.truetype(font_file, pt(10))
    page = Image.new("L", (width, height), 255)
    draw = ImageDraw.Draw(page)
    column = (width - 2 * margin - pt(gutter_pt)) // 2
    columns = []
    for index in range(2):
        x, y, lines = margin + index * (column + pt(gutter_pt)), margin, []
        while y < height - margin - pt(40):
            words = [rng.choice(vocabulary) for _ in range(rng.randint(40, 90))]
            line = ""
            for word in [*words[:-1], words[-1] + "."]:
                trial = f"{line} {word}".strip()
                if draw.textlength(trial, font=font) > column:
                    lines.append((y, line))
                    y, line = y + pt(12), word
                else:
                    line = trial
            lines.append((y, line))
            y += pt(12) + pt(6)
        kept = [(top, text) for top, text in lines if top <= height - margin - pt(12)]
        for top, text in kept:
            draw.text((x, top), text, font=font, fill=0)
        columns.append("\n".join(text for _, text in kept))
    return page, "\n\n".join(columns)
