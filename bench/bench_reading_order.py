"""Reading order on printed pages with reading-order ground truth: embedded vs Tesseract.

Run: ``.venv/bin/python bench/bench_reading_order.py [--show NAME] [--repeat 20]``.

The pages are ``tests/data/reading_order/`` (OCR-D ground truth, PAGE XML reading order;
see its README): two-column lexicon pages with a running header, a page number and a
figure caption inside a column, book pages with page numbers and footnotes. Per page:

- **CER**: order-sensitive character error rate of the whole page text against the
  regions' text in ground-truth order (``ocrflow.evaluation.metrics.cer``), where the
  ground truth has text (the lexicon pages have regions only);
- **order**: pair agreement of the ground-truth regions: each region is placed where the
  engine's output first reads a line whose centre lies in it, and the share of region pairs
  read in the ground truth's order is printed (1.0: the same order). It needs no
  recognition, so Fraktur pages count as much as Antiqua ones;
- **furn**: share of the lines in the ground truth's header and page-number regions that
  the engine labels ``page_header`` / ``page_footer`` (embedded only; Tesseract has no
  such labels);
- **layout ms**: the embedded engine's layout step alone (``layout.laid_out`` on the page's
  recognised lines, best of ``--repeat`` runs).
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from ocrflow.engines.embedded import EmbeddedEngine
from ocrflow.engines.layout import laid_out
from ocrflow.engines.tesseract import TesseractEngine
from ocrflow.evaluation.metrics import cer
from ocrflow.types import Block, BlockLabel

PAGES = Path(__file__).resolve().parents[1] / "tests" / "data" / "reading_order"
FURNITURE = {"header", "page-number"}
CAPTION = "caption"
FURNITURE_LABELS = {BlockLabel.PAGE_HEADER, BlockLabel.PAGE_FOOTER}


@dataclass(frozen=True, slots=True)
class Region:
    """A ground-truth region: PAGE type, box in pixels of the page image, text."""

    kind: str
    box: tuple[float, float, float, float]
    text: str

    def holds(self, x: float, y: float) -> bool:
        """Whether the point lies in the region's box."""
        x0, y0, x1, y1 = self.box
        return x0 <= x <= x1 and y0 <= y <= y1


def page_names() -> list[str]:
    """The pages' names, sorted."""
    return sorted(p.name.removesuffix(".regions.json") for p in PAGES.glob("*.regions.json"))


def regions(name: str) -> list[Region]:
    """The page's ground-truth regions in reading order."""
    found = json.loads((PAGES / f"{name}.regions.json").read_text())
    return [Region(r["type"], tuple(r["box"]), r["text"]) for r in found]


def truth_text(name: str) -> str | None:
    """The page's text in reading order, or None where the ground truth has none."""
    path = PAGES / f"{name}.txt"
    return path.read_text() if path.exists() else None


def line_centres(
    blocks: tuple[Block, ...], size: tuple[int, int]
) -> list[tuple[Block, float, float]]:
    """Each line of ``blocks`` (or the block itself when it has no lines), in order, with its
    centre in pixels."""
    width, height = size
    found = []
    for block in blocks:
        for item in block.lines or (block,):
            if item.bbox is not None:
                x0, y0, x1, y1 = item.bbox
                found.append((block, (x0 + x1) / 2 * width, (y0 + y1) / 2 * height))
    return found


def order_agreement(truth: list[Region], blocks: tuple[Block, ...], size: tuple[int, int]) -> float:
    """Share of ground-truth region pairs that the blocks read in the ground truth's order
    (a region's place: the first line read whose centre lies in it); NaN under two found.

    Pairs with a caption are left out: the ground truth reads a caption where it stands,
    the issue asks for it after the paragraph it interrupts; so are pairs of two running-head
    regions (page number and title of one line, read left to right or not)."""
    first: dict[int, int] = {}
    for position, (_, x, y) in enumerate(line_centres(blocks, size)):
        for index, region in enumerate(truth):
            if region.holds(x, y):
                first.setdefault(index, position)
    pairs = [
        (a, b)
        for a, b in itertools.combinations(sorted(first), 2)
        if not (truth[a].kind in FURNITURE and truth[b].kind in FURNITURE)
        and CAPTION not in (truth[a].kind, truth[b].kind)
    ]
    if not pairs:
        return float("nan")
    return sum(first[a] < first[b] for a, b in pairs) / len(pairs)


def furniture_labelled(
    truth: list[Region], blocks: tuple[Block, ...], size: tuple[int, int]
) -> float:
    """Share of lines inside the ground truth's header / page-number regions labelled
    page_header or page_footer; NaN when there are none."""
    furniture = [r for r in truth if r.kind in FURNITURE]
    hits = [
        block.label in FURNITURE_LABELS
        for block, x, y in line_centres(blocks, size)
        if any(r.holds(x, y) for r in furniture)
    ]
    return sum(hits) / len(hits) if hits else float("nan")


def layout_ms(boxes: tuple, repeat: int) -> float:
    """Best wall milliseconds of the layout step on ``boxes`` over ``repeat`` runs."""
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        laid_out(boxes)
        best = min(best, time.perf_counter() - started)
    return best * 1000


def _fmt(value: float) -> str:
    return "    -" if value != value else f"{value:5.3f}"


def main(argv: list[str] | None = None) -> int:
    """Read every page with both engines and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--show", help="print both engines' text of this page")
    parser.add_argument("--repeat", type=int, default=20, help="layout timing runs")
    args = parser.parse_args(argv)
    embedded, tesseract = EmbeddedEngine(), TesseractEngine()
    columns = ("CER emb", "tess", "ord emb", "tess", "furn")
    print(f"{'page':32} " + " ".join(f"{c:>7}" for c in columns) + f" {'layout ms':>9}")
    rows = []
    for name in page_names():
        image = Image.open(PAGES / f"{name}.jpg").convert("RGB")
        truth, text = regions(name), truth_text(name)
        emb = embedded.recognize(image)
        tess = tesseract.read(_png(image))
        row = (
            cer(text, emb.text) if text else float("nan"),
            cer(text, tess.text) if text else float("nan"),
            order_agreement(truth, emb.blocks, image.size),
            order_agreement(truth, tess.blocks, image.size),
            furniture_labelled(truth, emb.blocks, image.size),
            layout_ms(emb.boxes, args.repeat),
        )
        rows.append(row)
        print(f"{name:32} " + " ".join(f"{_fmt(v):>7}" for v in row[:5]) + f" {row[5]:9.1f}")
        if args.show == name:
            print(f"--- embedded ---\n{emb.text}\n--- tesseract ---\n{tess.text}")
    means = [statistics.fmean(v for v in column if v == v) for column in zip(*rows, strict=True)]
    print(f"{'mean':32} " + " ".join(f"{_fmt(v):>7}" for v in means[:5]) + f" {means[5]:9.1f}")
    return 0


def _png(image: Image.Image) -> bytes:
    import io

    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


if __name__ == "__main__":
    sys.exit(main())
