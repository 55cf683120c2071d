"""Text-layer route throughput on born-digital pages, against bare pypdfium2 in one process.

    .venv/bin/python bench/bench_text_route.py [--workers 2]

Prints pages/s of a whole ``ocrflow run --text-layer only`` (the route alone: pages whose
layer fails the quality check are skipped, not OCRed) (process start, hashing, workers,
writing Markdown/JSONL and the workspace included) and of a bare single-process pypdfium2
loop that only extracts text from the same pages, measured in the same run.
Goal (issue 2): >= 15 pages/s on a 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import pypdfium2 as pdfium

sys.path.insert(0, str(Path(__file__).resolve().parent))
from treemem import run_measured

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus" / "pdfs"
BORN_DIGITAL = [
    "pdfjs__tracemonkey.pdf",
    "docling__redp5110_sampled.pdf",
    "pdfplumber__federal-register-2020-17221.pdf",
    "texlive__texlive-ru.pdf",
    "pdfjs__freeculture.pdf",
    "pypdf-samples__GeoTopo-komprimiert.pdf",
    "pdf2image__test_241.pdf",
]


def bare_pdfium_pages_per_s(files: list[Path]) -> tuple[int, float]:
    """Open each file and extract every page's text, nothing else."""
    pages = 0
    started = time.perf_counter()
    for path in files:
        pdf = pdfium.PdfDocument(path)
        for index in range(len(pdf)):
            page = pdf[index]
            textpage = page.get_textpage()
            textpage.get_text_range()
            textpage.close()
            page.close()
            pages += 1
        pdf.close()
    return pages, pages / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    files = [CORPUS / name for name in BORN_DIGITAL if (CORPUS / name).exists()]
    if not files:
        sys.exit(f"corpus not found at {CORPUS}")
    bare_pages, bare_rate = bare_pdfium_pages_per_s(files)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        cmd = [
            sys.executable,
            "-m",
            "ocrflow.cli",
            "run",
            *map(str, files),
            "-o",
            str(out),
            "--workers",
            str(args.workers),
            "--text-layer",
            "only",
            "--json",
            "-q",
        ]
        usage = run_measured(cmd)
        summary = json.loads(usage.stdout)
    pages = sum(summary["pages"].values())
    routes = summary["routes"]
    rate = pages / usage.wall_s
    print(f"files: {len(files)}   pages: {pages}   routes: {routes}")
    print(
        f"ocrflow run (whole command, {args.workers} workers): {usage.wall_s:.1f} s wall, "
        f"{rate:.1f} pages/s, CPU {usage.cpu_s / pages * 1000:.1f} ms/page, "
        f"peak RSS {usage.peak_rss_mb:.0f} MiB"
    )
    print(
        f"bare pypdfium2 text extraction (1 process): {bare_pages} pages, {bare_rate:.1f} pages/s"
    )
    print(f"ratio ocrflow / bare pypdfium2: {rate / bare_rate:.2f}")
    print(f"goal >= 15 pages/s: {'met' if rate >= 15 else 'NOT met'}")


if __name__ == "__main__":
    main()
