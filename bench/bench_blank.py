"""The blank-page test's cost against rendering the same page with bare pypdfium2.

    .venv/bin/python bench/bench_blank.py [--pages 40] [--dims 1288,3508]

Every rendered page passes ``is_blank_image`` before any engine sees it, so its cost is
paid on every page of a run. For the first ``--pages`` pages of the corpus PDFs, each
rendered at each ``--dims`` (longest side, px) by bare pypdfium2, this prints the median
milliseconds of the render and of the blank test on its image (best of 3 each), and their
ratio. Goal: under 10 ms a page at 1288 px (about 3 ms on a quiet machine), a small share
of a page's cost on any route, growing much slower than the page: it judges a copy of about
320 px (the shrink itself reads every pixel). 2026-11-28, beside a CI run: 3.95 ms against
10.6 ms of bare rendering (born-digital first pages, 1288 px), 8.1 against 48.2 at 3508 px.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pypdfium2 as pdfium

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from ocrflow.render.blank import is_blank_image

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus" / "pdfs"
ROUNDS = 3
T = TypeVar("T")


def _best(call: Callable[[], T], rounds: int = ROUNDS) -> tuple[float, T]:
    """The fastest of ``rounds`` calls, in seconds, and the last call's value."""
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        value = call()
        times.append(time.perf_counter() - started)
    return min(times), value


def measure(dims: int, max_pages: int) -> tuple[list[float], list[float], int]:
    """Render and blank-test milliseconds of each page, and how many were blank."""
    render_ms, blank_ms, blanks = [], [], 0
    for path in sorted(CORPUS.glob("*.pdf")):
        if len(render_ms) >= max_pages:
            break
        try:
            pdf = pdfium.PdfDocument(path)
            page = pdf[0]
        except Exception:  # encrypted, corrupt: not what this bench measures
            continue
        width, height = page.get_size()
        scale = dims / max(width, height, 1.0)
        if scale * min(width, height) < 16:
            page.close()
            pdf.close()
            continue
        rendered, image = _best(lambda: page.render(scale=scale).to_pil())  # noqa: B023
        tested, blank = _best(lambda: is_blank_image(image))  # noqa: B023
        render_ms.append(rendered * 1000)
        blank_ms.append(tested * 1000)
        blanks += bool(blank)
        page.close()
        pdf.close()
    return render_ms, blank_ms, blanks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=40)
    parser.add_argument("--dims", default="1288,3508")
    args = parser.parse_args()
    if not CORPUS.is_dir():
        print(f"no corpus at {CORPUS}", file=sys.stderr)
        return 2
    print(f"{'px':>6} {'pages':>5} {'render ms':>10} {'blank ms':>9} {'ratio':>6} {'blank':>5}")
    for dims in (int(d) for d in args.dims.split(",")):
        render_ms, blank_ms, blanks = measure(dims, args.pages)
        render, test = statistics.median(render_ms), statistics.median(blank_ms)
        print(
            f"{dims:>6} {len(render_ms):>5} {render:>10.1f} {test:>9.2f}"
            f" {test / render:>6.3f} {blanks:>5}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
