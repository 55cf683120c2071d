"""How long the render pool takes to start and to answer its first jobs, by worker count
(issue 21: the render pool's start is part of ocrflow's lead on a 16-core machine).

Run: ``python bench/gpu/pool_start.py PDF [WORKERS ...]``; prints, per worker count, the
seconds of ``RenderPool()``, of the first probe and of the first one-page render.
"""

from __future__ import annotations

import asyncio
import sys
import time

from ocrflow.render.jobs import PageJob, ProbeJob, RenderSpec
from ocrflow.render.pool import RenderPool


async def measure(pdf: str, workers: int) -> dict[str, float]:
    """Seconds of each step of a fresh pool's start."""
    started = time.perf_counter()
    pool = RenderPool(workers, page_timeout_s=60, memory_mb=4096)
    built = time.perf_counter()
    await pool.probe(ProbeJob(pdf, "pdf"))
    probed = time.perf_counter()
    await pool.render(
        PageJob(pdf, "pdf", (1,), RenderSpec(target_dim=1288, text_layer="off", encoding="png"))
    )
    rendered = time.perf_counter()
    await asyncio.to_thread(pool.close)
    return {
        "workers": workers,
        "init_s": round(built - started, 3),
        "probe_s": round(probed - built, 3),
        "render_s": round(rendered - probed, 3),
    }


if __name__ == "__main__":
    for count in [int(n) for n in sys.argv[2:]] or [2, 16]:
        print(asyncio.run(measure(sys.argv[1], count)), flush=True)
