"""Render throughput against the number of render processes (1, 2, 4, … up to the cores).

    .venv/bin/python bench/bench_render_scaling.py [--max-workers 16] [--pages 400] [PDF ...]

Renders the same pages (text layer read and scored, page rendered at 1288 px, PNG-encoded,
as for a VLM) through ocrflow's RenderPool with N worker processes and prints pages/s,
speed-up over one process and parallel efficiency. Default inputs: born-digital corpus PDFs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
from ocrflow.render.jobs import PageJob, RenderSpec  # noqa: E402
from ocrflow.render.pool import RenderPool  # noqa: E402

CORPUS = REPO.parent / "shared" / "corpus" / "pdfs"
DEFAULT = ["unstructured__DA-619p.pdf", "pdfjs__freeculture.pdf", "pdf2image__test_241.pdf"]


def page_jobs(paths: list[Path], pages: int) -> list[PageJob]:
    """Chunks of 8 pages, as the pipeline submits them, spread over the documents."""
    import pypdfium2 as pdfium

    spec = RenderSpec(target_dim=1288, text_layer="off", encoding="png")
    per_doc = max(1, pages // len(paths))
    jobs = []
    for path in paths:
        count = min(per_doc, len(pdfium.PdfDocument(path)))
        numbers = list(range(1, count + 1))
        jobs += [
            PageJob(str(path), "pdf", tuple(numbers[i : i + 8]), spec)
            for i in range(0, len(numbers), 8)
        ]
    return jobs


async def measure(workers: int, jobs: list[PageJob]) -> float:
    pool = RenderPool(workers, page_timeout_s=60, memory_mb=2048)
    try:
        await asyncio.gather(*(pool.render(j) for j in jobs[:workers]))  # start workers
        started = time.perf_counter()
        results = await asyncio.gather(*(pool.render(j) for j in jobs))
        elapsed = time.perf_counter() - started
    finally:
        pool.close()
    pages = sum(len(r) for r in results)
    assert all(p.image is not None or p.blank for r in results for p in r)
    return pages / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("pdfs", nargs="*", type=Path)
    parser.add_argument("--max-workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--pages", type=int, default=400)
    args = parser.parse_args()
    paths = args.pdfs or [CORPUS / name for name in DEFAULT]
    jobs = page_jobs(paths, args.pages)
    counts = [n for n in (1, 2, 4, 8, 16, 32, 64) if n <= args.max_workers]
    print(f"{os.cpu_count()} cores; {sum(len(j.pages) for j in jobs)} pages per measurement")
    print(f"{'workers':>7} {'pages/s':>8} {'speed-up':>8} {'efficiency':>10}")
    base = None
    for n in counts:
        rate = asyncio.run(measure(n, jobs))
        base = base or rate
        print(f"{n:>7} {rate:>8.1f} {rate / base:>8.2f} {rate / base / n:>10.2f}")


if __name__ == "__main__":
    main()
