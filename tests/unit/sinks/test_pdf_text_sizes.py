"""Font sizes of the searchable PDF's text layer (``pdf_text_sizes.py``), and what poppler's
``pdftotext`` reads from a layer drawn with them: two columns boxed as Tesseract boxes
lines (tight to the ink), with headings across both columns at one height, must come out
one column after the other, each word apart."""

from __future__ import annotations

import math
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from ocrflow.document.model import Page
from ocrflow.sinks.base import OriginalFile
from ocrflow.sinks.pdf_text_layer import PageFrame, text_layer
from ocrflow.sinks.pdf_text_sizes import BODY_SPREAD, LEADING, NEIGHBOUR_ROOM, LineSpan, line_sizes
from ocrflow.sinks.searchable_pdf import searchable_pdf
from ocrflow.types import Block, BlockLabel, Line, PageResult, Route, Word

from .test_searchable_pdf import scan_pdf

HEIGHT = 792.0
BOX = 0.65  # the layer font's ascent + descent


def paragraph(block: int, top: float, pitch: float, tall: float, lines: int) -> dict[int, LineSpan]:
    return {
        block * 100 + i: LineSpan(block, 0.1, top + i * pitch, 0.45, top + i * pitch + tall)
        for i in range(lines)
    }


@pytest.mark.parametrize("tall", [0.0105, 0.0155])  # Tesseract's boxes, the embedded engine's
def test_a_paragraph_is_sized_from_its_line_spacing_whatever_its_boxes(tall: float) -> None:
    spans = paragraph(1, 0.1, 0.0125, tall, 8)
    sizes = line_sizes(spans, HEIGHT, BOX)
    assert len(set(sizes.values())) == 1  # one size a block
    assert sizes[100] == pytest.approx(min(LEADING * 0.0125, tall / BOX) * HEIGHT)
    assert sizes[100] == pytest.approx(LEADING * 0.0125 * HEIGHT, rel=0.05)


def test_a_heading_boxed_a_little_taller_than_the_body_is_set_at_the_body_size() -> None:
    """A heading of its own size is a block of its own, and poppler took the blocks of two
    columns, level and aligned, for a table (read across); one far larger keeps its size."""
    body = paragraph(1, 0.1, 0.0125, 0.0125, 8)
    near = {900: LineSpan(9, 0.1, 0.3, 0.3, 0.3 + 1.4 * 0.0125)}
    far = {900: LineSpan(9, 0.1, 0.3, 0.5, 0.3 + 3 * 0.0125)}
    sizes = line_sizes(body | near, HEIGHT, BOX)
    assert sizes[900] == sizes[100]
    sizes = line_sizes(body | far, HEIGHT, BOX)
    assert sizes[900] > BODY_SPREAD * sizes[100]


def test_lines_set_closer_than_their_height_are_kept_apart() -> None:
    # Two one-line blocks whose boxes overlap (a photographed page's bent rows).
    spans = {
        1: LineSpan(1, 0.1, 0.150, 0.6, 0.190),
        2: LineSpan(2, 0.1, 0.165, 0.3, 0.205),
    }
    sizes = line_sizes(spans, HEIGHT, BOX)
    distance = (spans[2].middle - spans[1].middle) * HEIGHT
    assert max(sizes.values()) <= NEIGHBOUR_ROOM * distance + 1e-9
    # Side by side, they do not limit each other.
    apart = {1: spans[1], 2: LineSpan(2, 0.7, 0.165, 0.9, 0.205)}
    assert min(line_sizes(apart, HEIGHT, BOX).values()) > NEIGHBOUR_ROOM * distance


def test_a_logo_over_its_caption_is_no_line_spacing() -> None:
    spans = {1: LineSpan(1, 0.6, 0.80, 0.75, 0.86), 2: LineSpan(1, 0.6, 0.87, 0.85, 0.88)}
    sizes = line_sizes(spans, HEIGHT, BOX)
    assert sizes[2] <= 0.01 * HEIGHT / BOX + 1e-9  # its own height, not the logo's spacing


def test_any_boxes_get_finite_sizes() -> None:
    # Degenerate boxes (a VLM's zero-height lines, lines on one spot) among real ones.
    zero = {i: LineSpan(0, 0.1, 0.1 * i, 0.5, 0.1 * i) for i in range(3)}
    stacked = {3: LineSpan(1, 0.1, 0.5, 0.5, 0.51), 4: LineSpan(1, 0.1, 0.5125, 0.5, 0.5225)}
    assert all(math.isfinite(size) for size in line_sizes(zero | stacked, HEIGHT, BOX).values())
    rng = random.Random(7)
    for _ in range(200):
        spans = {}
        for line in range(rng.randint(1, 12)):
            top = rng.choice([0.1, 0.1, rng.random()])
            tall = rng.choice([0.0, 0.0, 0.01, rng.random() / 10])
            spans[line] = LineSpan(rng.randint(0, 2), 0.1, top, 0.1 + rng.random(), top + tall)
        sizes = line_sizes(spans, HEIGHT, BOX)
        assert set(sizes) == set(spans)
        assert all(math.isfinite(size) and size >= 0 for size in sizes.values())


@pytest.mark.parametrize("box", [(0, 0, 612, 0), (0, 0, 0, 792), (0, 0, 612, 792)])
def test_a_page_of_no_area_gets_no_layer_and_no_error(box: tuple[float, ...]) -> None:
    """A hostile file's MediaBox of no height or width: nothing to size a line against."""
    lines = tuple(
        Line(f"line {i}", (0.1, 0.1 + i * 0.02, 0.5, 0.115 + i * 0.02), 0.9) for i in range(3)
    )
    page = Page(1, "x", Route.ENGINE, blocks=(Block(BlockLabel.TEXT, "x", None, 0.9, lines),))
    layer = text_layer(page, PageFrame(box), "F", lambda text: text.encode("utf-16-be").hex())
    assert (layer != b"") == (box[2] > 0 and box[3] > 0)


def tight_column(x0: float, name: str, first: int) -> list[Block]:
    """Two headings (in the text's type) with their paragraphs, ``first`` and 14 - ``first``
    lines, boxed as Tesseract boxes them: each word's box hugs its ink (a word without
    ascenders or descenders is lower), words 0.004 apart. (Where two columns' paragraph
    breaks lie level, poppler reads the paragraphs across, whatever the sizes: a page of
    real type reads the same.)"""
    blocks, top = [], 0.10
    for part, lines in ((f"{name}a", first), (f"{name}b", 14 - first)):
        blocks.append(_block([[(f"{part}head", 0.0125)]], x0, top))
        rows = [
            [(f"{part}{i}w{j}", 0.0105 if j % 2 else 0.0075) for j in range(4)]
            for i in range(lines)
        ]
        blocks.append(_block(rows, x0, top + 0.015))
        top += 0.03 + lines * 0.0125
    return blocks


def _block(rows: list[list[tuple[str, float]]], x0: float, top: float) -> Block:
    lines = []
    for i, row in enumerate(rows):
        baseline, x, words = top + i * 0.0125 + 0.0105, x0, []
        for text, tall in row:
            width = 0.0075 * len(text)
            words.append(Word(text, (x, baseline - tall, x + width, baseline), 0.9))
            x += width + 0.004
        box = (x0, min(w.bbox[1] for w in words), x - 0.004, baseline)  # type: ignore[index]
        lines.append(Line(" ".join(w.text for w in words), box, 0.9, tuple(words)))
    text = "\n".join(line.text for line in lines)
    return Block(BlockLabel.TEXT, text, None, 0.9, tuple(lines))


def pdftotext_words(blocks: list[Block], folder: Path) -> tuple[list[str], list[str]]:
    """The words of the page's blocks, and those ``pdftotext`` reads from its searchable
    PDF (a blank scan under them)."""
    text = "\n\n".join(block.text for block in blocks)
    page = PageResult(1, text, Route.ENGINE, blocks=tuple(blocks))
    source, out = folder / "in.pdf", folder / "out.pdf"
    scan_pdf(source, [{}])
    out.write_bytes(searchable_pdf(OriginalFile(str(source), "pdf"), (page,)))
    read = subprocess.run(["pdftotext", str(out), "-"], capture_output=True, text=True, check=True)
    return text.split(), read.stdout.split()


@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="[needs poppler] pdftotext")
def test_pdftotext_reads_tight_boxed_columns_one_after_the_other(tmp_path: Path) -> None:
    blocks = [*tight_column(0.08, "L", 8), *tight_column(0.52, "R", 5)]
    written, read = pdftotext_words(blocks, tmp_path)
    assert read == written  # every word apart, the columns one after the other


def _right_edge(blocks: list[Block]) -> float:
    return max(line.bbox[2] for block in blocks for line in block.lines)  # type: ignore[index]


@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="[needs poppler] pdftotext")
def test_pdftotext_reads_tight_boxed_columns_a_10_pt_gutter_apart_one_after_the_other(
    tmp_path: Path,
) -> None:
    """Type on 9.9-pt leading is set at 12.4 pt from its spacing, and poppler pulls a word
    within 0.7 sizes (8.7 pt) of a block's side into it: boxes tight to the ink keep a 10-pt
    gutter apart (the embedded engine's lines are moved in to their ink for this:
    ``engines/ink.py``)."""
    left = tight_column(0.08, "L", 8)
    right = tight_column(_right_edge(left) + 10 / 612, "R", 5)
    written, read = pdftotext_words([*left, *right], tmp_path)
    assert read == written
