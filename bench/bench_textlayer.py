"""Text-layer extraction and scoring over the shared corpus: verdicts and cost per page.

    .venv/bin/python bench/bench_textlayer.py [--pages 30] [--all] [--verbose]

For every corpus PDF the manifest says has a text layer (``--all``: every PDF pdfium opens),
the first ``--pages`` pages are loaded with pypdfium2 in this one process, and
``extract_text_layer`` + ``score_text_layer`` run on each. Prints per file the pages
accepted and rejected, the reasons, and the median milliseconds of extract+score a page;
then the median, 90th percentile and pages/s over all pages. Page loading is timed apart.
Goal: extract+score <= 10 ms a page (median) on born-digital pages, so that the text-layer
route reaches 15 pages/s end to end on 2 cores.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pypdfium2 as pdfium

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from ocrflow.render.textlayer import extract_text_layer, score_text_layer

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"


@dataclass
class FileResult:
    name: str
    accepted: list[int] = field(default_factory=list)
    rejected: list[tuple[int, tuple[str, ...]]] = field(default_factory=list)
    score_ms: list[float] = field(default_factory=list)
    load_ms: list[float] = field(default_factory=list)


def corpus_files(include_all: bool) -> list[Path]:
    """PDFs of the manifest with a text layer (or all of them)."""
    with (CORPUS / "MANIFEST.tsv").open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    wanted = [
        row["file"]
        for row in rows
        if row["file"].startswith("pdfs/")
        and (include_all or row["has_text_layer"] in ("yes", "partial"))
    ]
    return [CORPUS / name for name in wanted]


def measure_file(path: Path, max_pages: int) -> FileResult | None:
    """Extract and score the first ``max_pages`` pages; None when pdfium cannot open it."""
    try:
        pdf = pdfium.PdfDocument(path)
        count = len(pdf)
    except Exception:  # encrypted, corrupt: not what this bench measures
        return None
    result = FileResult(path.stem)
    for index in range(min(count, max_pages)):
        started = time.perf_counter()
        try:
            page = pdf[index]
        except Exception:
            continue
        loaded = time.perf_counter()
        quality = score_text_layer(extract_text_layer(page))
        done = time.perf_counter()
        page.close()
        result.load_ms.append((loaded - started) * 1000)
        result.score_ms.append((done - loaded) * 1000)
        if quality.ok:
            result.accepted.append(index + 1)
        else:
            result.rejected.append((index + 1, quality.reasons))
    pdf.close()
    return result


def print_file(result: FileResult, verbose: bool) -> None:
    pages = len(result.score_ms)
    reasons = Counter(reason for _, found in result.rejected for reason in found)
    summary = ", ".join(f"{reason} {n}" for reason, n in reasons.most_common())
    median = statistics.median(result.score_ms)
    print(
        f"{result.name[:52]:52s} {pages:3d} pages  accept {len(result.accepted):3d}  "
        f"reject {len(result.rejected):3d}  {median:6.2f} ms  {summary}"
    )
    if verbose:
        for number, found in result.rejected:
            print(f"    p{number}: {', '.join(found)}")


def print_totals(results: list[FileResult]) -> None:
    score_ms = sorted(ms for result in results for ms in result.score_ms)
    load_ms = [ms for result in results for ms in result.load_ms]
    accepted = sum(len(result.accepted) for result in results)
    p90 = score_ms[int(0.9 * (len(score_ms) - 1))]
    print(
        f"\n{len(score_ms)} pages in {len(results)} files: {accepted} accepted, "
        f"{len(score_ms) - accepted} rejected"
    )
    mean = statistics.fmean(score_ms)
    print(
        f"extract+score: median {statistics.median(score_ms):.2f} ms/page, p90 {p90:.2f} ms, "
        f"mean {mean:.2f} ms ({1000 / mean:.0f} pages/s)"
    )
    print(f"page load (pdfium, apart): median {statistics.median(load_ms):.2f} ms/page")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pages", type=int, default=30, help="first pages of each file")
    parser.add_argument("--all", action="store_true", help="every PDF, not only text layers")
    parser.add_argument("--verbose", action="store_true", help="list rejected pages")
    args = parser.parse_args()
    if not CORPUS.is_dir():
        sys.exit(f"corpus not found at {CORPUS}")
    results = []
    for path in corpus_files(args.all):
        result = measure_file(path, args.pages)
        if result is not None and result.score_ms:
            print_file(result, args.verbose)
            results.append(result)
    print_totals(results)


if __name__ == "__main__":
    main()
