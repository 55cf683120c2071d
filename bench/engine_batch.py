"""The batch half of ``bench_engines.py``: seconds per page with every core busy, the way a
run uses the engines (``--parallel`` pages at once; Tesseract gets as many processes).

Both engines read the same pages, alternately, ``repeat`` times each. On a shared machine
one round can land on a busy moment, so the verdict is the median of the per-round ratios
(each round's two batches run back to back), with each engine's best round beside it.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from PIL import Image

from ocrflow.engines.embedded import EmbeddedEngine, default_threads
from ocrflow.engines.tesseract import TesseractEngine
from ocrflow.render.jobs import encode_image
from ocrflow.types import PageRequest


@dataclass(frozen=True, slots=True)
class BatchSettings:
    """Pages at once (``None``: the cores), embedded threads a page (``None``: the cores
    shared among those pages), other embedded options, Tesseract's page segmentation."""

    parallel: int | None = None
    threads: int | None = None
    embedded: dict[str, Any] = field(default_factory=dict)
    psm: int = 3


def print_batch(
    label: str, images: list[Image.Image], settings: BatchSettings, repeat: int
) -> None:
    """Time ``repeat`` batches of ``images`` per engine and print s/page and the ratio."""
    parallel = settings.parallel or os.cpu_count() or 1
    threads = settings.threads or default_threads(parallel)
    pages = [encode_image(image, "raw") for image in images]
    embedded = EmbeddedEngine(threads=threads, max_parallel=parallel, **settings.embedded)
    tesseract = TesseractEngine(psm=settings.psm, max_parallel=parallel)
    # One event loop for every round: an engine's page slots belong to the loop that
    # first used them.
    seconds = asyncio.run(_rounds({"embedded": embedded, "tesseract": tesseract}, pages, repeat))
    ratios = [e / t for e, t in zip(seconds["embedded"], seconds["tesseract"], strict=True)]
    emb, tess = min(seconds["embedded"]), min(seconds["tesseract"])
    print(
        f"\nbatch @ {label}: {len(pages)} pages, {parallel} at once, embedded "
        f"{threads} thread(s) a page, {os.cpu_count()} cores, {repeat} rounds: best "
        f"embedded {emb:.3f} s/page, tesseract {tess:.3f} s/page (ratio {emb / tess:.2f}); "
        f"median per-round ratio {statistics.median(ratios):.2f} "
        f"(rounds {', '.join(f'{r:.2f}' for r in ratios)})"
    )


async def _rounds(engines: dict[str, Any], pages: list[Any], repeat: int) -> dict[str, list[float]]:
    """Seconds a page of each batch, per engine; alternate which engine goes first."""
    for engine in engines.values():  # load and warm up outside the clock
        await engine.infer(PageRequest(image=pages[0]))
    seconds: dict[str, list[float]] = {name: [] for name in engines}
    names = list(engines)
    for round_ in range(repeat):
        for name in names if round_ % 2 == 0 else reversed(names):
            seconds[name].append(await _batch(engines[name], pages) / len(pages))
    for engine in engines.values():
        if hasattr(engine, "aclose"):
            await engine.aclose()
    return seconds


async def _batch(engine: Any, pages: list[Any]) -> float:
    started = time.perf_counter()
    await asyncio.gather(*(engine.infer(PageRequest(image=page)) for page in pages))
    return time.perf_counter() - started
