"""ocrflow against the fake VLM server: how close to the server's capacity, at what CPU cost.

Run: ``.venv/bin/python bench/bench_vlm.py`` (about 5 minutes; ``--help`` for options).

For each capacity (default 10, 40 and 80 pages/s: the goal case, the case near this
machine's CPU limit, and one beyond it) a fresh ``tests.fakevllm.server`` starts with
128 max sequences and 100 output tokens a page; then the real CLI converts four real
multi-page PDFs of ``../shared/corpus`` (1,329 pages, ``--text-layer off`` so that every
page goes to the engine) with the olmOCR recipe. The server runs in its own process, so its
CPU is not counted as ours; it is printed beside. At ocrflow's default ``--split-pages``
(500) DA-619p becomes two range items, started as soon as the split is made.

Figures printed per capacity:

- ``ratio``: achieved pages/s (pages / wall time of the whole command, start-up included)
  divided by the server's full-batch capacity;
- ``steady-state ratio``: pages/s while the server's batch was full (first to last moment
  it ran 128 sequences, from polling its ``/metrics``) divided by capacity: what the client
  sustains once running, without start-up and the drain of the last batch;
- ``ideal-makespan ratio``: the time a perfect client would need (every page at t=0: full
  batches of 128, then one smaller, faster batch) divided by our wall time;
- CPU seconds per page of ocrflow's process tree (user+sys, sampled by pid), split into
  the main process (asyncio, HTTP, JSON, results) and the render worker processes (PDFium
  render + image encode), and the server's own CPU per page.

Then two small studies behind the design choices:

- transport: the client's CPU per request through ``OpenAIEngine`` with its sharded httpx
  pools (16 requests a pool) against one pool for everything (synthetic 200 KB images, no
  rendering, so only the client is measured);
- image encoding: CPU and size per page of PNG (zlib level 1, the default; 0; 6), JPEG
  q=95 and raw pixels, on the same pages.

The machine is shared and noisy: ``--repeat N`` repeats each capacity and prints medians.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import io
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# A sibling module: running ``python bench/bench_vlm.py`` puts bench/ first on sys.path.
from vlm_measurement import Watcher, ideal_makespan, run_split, steady_state

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.fakevllm.process import ServerHandle, running_server  # noqa: E402

CORPUS = REPO / ".." / "shared" / "corpus" / "pdfs"
DOCUMENTS = (
    "unstructured__DA-619p.pdf",  # 619 pages
    "pdfjs__freeculture.pdf",  # 352
    "pdf2image__test_241.pdf",  # 241
    "pypdf-samples__GeoTopo-komprimiert.pdf",  # 117
)
MAX_NUM_SEQS = 128
TOKENS_PER_PAGE = 100
MODEL = "olmocr"


# -- one capacity ------------------------------------------------------------------------
@dataclass
class Case:
    capacity: float
    pages: int
    wall_s: float
    ratio: float
    steady_ratio: float | None
    steady_s: float | None
    ideal_ratio: float
    main_cpu_per_page: float
    workers_cpu_per_page: float
    server_cpu_per_page: float
    peak_rss_mb: float
    mean_batch: float
    max_running: int
    aborted: int
    machine_busy: float
    workers: int
    #: Seconds from the command's start to the first request at the server, and from the
    #: last moment of a full batch to the command's end.
    startup_s: float
    drain_s: float

    @property
    def cpu_per_page(self) -> float:
        return self.main_cpu_per_page + self.workers_cpu_per_page


def server_flags(pages_per_s: float) -> tuple[str, ...]:
    return (
        "--reply-format", "olmocr", "--model", MODEL,
        "--pages-per-s", str(pages_per_s),
        "--max-num-seqs", str(MAX_NUM_SEQS),
        "--tokens-per-page", str(TOKENS_PER_PAGE),
    )  # fmt: skip


def ocrflow_command(
    server: ServerHandle, out: Path, documents: list[Path], split_pages: int | None
) -> list[str]:
    split = ["--split-pages", str(split_pages)] if split_pages else []
    return [
        sys.executable, "-m", "ocrflow.cli", "run", *map(str, documents), "-o", str(out),
        "--text-layer", "off", "--engine", "openai", "--server", server.base_url,
        "--model", MODEL, "--recipe", "olmocr", "--json", "-q", *split,
    ]  # fmt: skip


def run_case(pages_per_s: float, documents: list[Path], split_pages: int | None = None) -> Case:
    """Convert ``documents`` against a fresh server of ``pages_per_s`` capacity."""
    with (
        tempfile.TemporaryDirectory(prefix="bench-vlm-") as tmp,
        running_server(*server_flags(pages_per_s)) as server,
    ):
        server_cpu0 = server.cpu_seconds()
        with Watcher(server.url) as watcher:
            command = ocrflow_command(server, Path(tmp) / "out", documents, split_pages)
            started = time.monotonic()
            tree = run_split(command)
            ended = time.monotonic()
        server_cpu = server.cpu_seconds() - server_cpu0
        stats = server.stats()
    if tree.returncode != 0:
        raise SystemExit(f"ocrflow failed ({tree.returncode}):\n{tree.stderr[-3000:]}")
    record = json.loads(tree.stdout)
    pages = sum(record["pages"].values())
    capacity = stats["capacity"]
    full_pps = capacity["full_batch_pages_per_s"]
    steady = steady_state(watcher.samples, MAX_NUM_SEQS)
    full = [x for x in watcher.samples if x.running >= MAX_NUM_SEQS]
    steady_pps = steady[1] / TOKENS_PER_PAGE if steady else None
    return Case(
        capacity=full_pps,
        pages=pages,
        wall_s=tree.wall_s,
        ratio=pages / tree.wall_s / full_pps,
        steady_ratio=steady_pps / full_pps if steady_pps else None,
        steady_s=steady[0] if steady else None,
        ideal_ratio=ideal_makespan(pages, capacity) / tree.wall_s,
        main_cpu_per_page=tree.main_cpu_s / pages,
        workers_cpu_per_page=tree.workers_cpu_s / pages,
        server_cpu_per_page=server_cpu / pages,
        peak_rss_mb=tree.peak_rss_mb,
        mean_batch=stats["engine"]["mean_batch"],
        max_running=stats["engine"]["max_running_seen"],
        aborted=stats["outcomes"].get("aborted", 0),
        machine_busy=tree.machine_busy,
        workers=_render_workers(),
        startup_s=next((x.t for x in watcher.samples if x.running + x.waiting), ended) - started,
        drain_s=ended - max((x.t for x in full), default=ended),
    )


def _render_workers() -> int:
    """The render worker count ocrflow picks by default (``RenderOptions.workers``)."""
    from ocrflow.config import RenderOptions

    return RenderOptions().workers


def median_case(cases: list[Case]) -> dict[str, Any]:
    """Per-field medians of repeated runs (``None`` where a run had no steady state)."""
    fields = [f for f in Case.__dataclass_fields__ if f != "capacity"]
    medians: dict[str, Any] = {"capacity": cases[0].capacity, "runs": len(cases)}
    for name in [*fields, "cpu_per_page"]:
        values = [getattr(c, name) for c in cases if getattr(c, name) is not None]
        medians[name] = statistics.median(values) if values else None
    return medians


def print_case(m: dict[str, Any]) -> None:
    def fmt(value: float | None, spec: str) -> str:
        return "n/a" if value is None else format(value, spec)

    print(f"\n== capacity {m['capacity']:.1f} pages/s ({m['runs']} run(s), medians) ==")
    print(f"  pages                       {m['pages']:.0f} in {m['wall_s']:.1f} s")
    print(f"  ratio (pages/s / capacity)  {m['ratio']:.3f}   [whole command, start-up included]")
    print(
        f"  steady-state ratio          {fmt(m['steady_ratio'], '.3f')}   "
        f"[while the batch was full: {fmt(m['steady_s'], '.0f')} s]"
    )
    print(f"  ideal-makespan ratio        {m['ideal_ratio']:.3f}   [perfect client / our wall]")
    print(
        f"  ocrflow CPU per page        {m['cpu_per_page'] * 1000:.1f} ms = main "
        f"{m['main_cpu_per_page'] * 1000:.1f} + render workers "
        f"{m['workers_cpu_per_page'] * 1000:.1f}"
    )
    per_s = m["pages"] / m["wall_s"]
    print(
        f"  ocrflow CPU in use          {m['cpu_per_page'] * per_s:.2f} cores of "
        f"{os.cpu_count()}: main {m['main_cpu_per_page'] * per_s:.2f}, "
        f"{m['workers']:.0f} render workers {m['workers_cpu_per_page'] * per_s:.2f}"
    )
    print(f"  machine busy (anyone)       {m['machine_busy']:.0%}")
    ceiling = (os.cpu_count() or 1) / m["cpu_per_page"]
    render_ceiling = m["workers"] / m["workers_cpu_per_page"]
    print(
        f"  CPU ceiling                 {ceiling:.0f} pages/s on {os.cpu_count()} idle cores; "
        f"render workers alone {render_ceiling:.0f} pages/s"
    )
    print(
        f"  start-up / drain            first request after {m['startup_s']:.1f} s; "
        f"{m['drain_s']:.1f} s from the last full batch to the end"
    )
    print(f"  server CPU per page         {m['server_cpu_per_page'] * 1000:.1f} ms")
    print(
        f"  server batch                mean {m['mean_batch']:.1f}, max {m['max_running']:.0f}"
        f" of {MAX_NUM_SEQS}; aborted requests {m['aborted']:.0f}"
    )
    print(f"  peak RSS of ocrflow's tree  {m['peak_rss_mb']:.0f} MiB")


# -- transport study ---------------------------------------------------------------------
async def _drive_engine(url: str, requests: int, concurrency: int) -> float:
    """Client CPU seconds for ``requests`` synthetic pages through ``OpenAIEngine``."""
    from ocrflow.engines.openai import OpenAIEngine
    from ocrflow.types import PageImage, PageRequest

    blob = os.urandom(150 * 1024)
    pages = [
        PageRequest(PageImage(i.to_bytes(4, "big") + blob, 1000, 1288), prompt="Read.")
        for i in range(requests)
    ]
    engine = OpenAIEngine([url], MODEL, max_concurrency=concurrency)
    try:
        await engine.wait_ready(10)
        started = time.process_time()
        await asyncio.gather(*(engine.infer(p) for p in pages))
        return time.process_time() - started
    finally:
        await engine.aclose()


def transport_study(requests: int = 512, concurrency: int = 136) -> dict[str, float]:
    """Client CPU ms per request: sharded pools (as shipped) vs one pool for everything."""
    import ocrflow.engines.http_pools as openai_module

    shipped = openai_module.SHARD_REQUESTS
    found: dict[str, float] = {}
    with running_server(*server_flags(40)) as server:
        for label, shard in (("sharded, 16 a pool", shipped), ("one pool", 10**6)):
            openai_module.SHARD_REQUESTS = shard
            try:
                cpu = asyncio.run(_drive_engine(server.base_url, requests, concurrency))
            finally:
                openai_module.SHARD_REQUESTS = shipped
            found[label] = cpu / requests * 1000
    return found


# -- encoding study ----------------------------------------------------------------------
def encoding_study(documents: list[Path], pages_each: int = 12) -> dict[str, tuple[float, float]]:
    """``{encoding: (CPU ms per page, KiB per page)}`` on the same rendered pages."""
    import pypdfium2 as pdfium

    from ocrflow.render.pdf import render_pdf_page

    images = []
    for path in documents:
        pdf = pdfium.PdfDocument(str(path))
        try:
            step = max(1, len(pdf) // pages_each)
            for index in range(0, len(pdf), step)[:pages_each]:
                page = pdf[index]
                images.append(
                    render_pdf_page(
                        page, target_dim=1288, max_page_points=200_000, max_pixels=40_000_000
                    )
                )
                page.close()
        finally:
            pdf.close()
    encoders = {
        "png level 1 (default)": lambda im, b: im.save(b, format="PNG", compress_level=1),
        "png level 1, gray if so": _png_gray_when_lossless,
        "png level 0": lambda im, b: im.save(b, format="PNG", compress_level=0),
        "png level 6": lambda im, b: im.save(b, format="PNG", compress_level=6),
        "jpeg q=95": lambda im, b: im.save(b, format="JPEG", quality=95),
        "raw pixels": lambda im, b: b.write(im.tobytes()),
    }
    found = {}
    for name, encode in encoders.items():
        sizes = []
        started = time.process_time()
        for image in images:
            buffer = io.BytesIO()
            encode(image, buffer)
            sizes.append(len(buffer.getvalue()))
        cpu = (time.process_time() - started) / len(images)
        # What the main process then pays per page for the wire form of that size.
        blob = b"x" * int(statistics.mean(sizes))
        wire_started = time.process_time()
        for _ in range(20):
            json.dumps({"url": base64.b64encode(blob).decode()})
        wire = (time.process_time() - wire_started) / 20
        found[name] = (cpu * 1000, statistics.mean(sizes) / 1024, wire * 1000)
    return found


def _png_gray_when_lossless(image: Any, buffer: io.BytesIO) -> None:
    """PNG level 1, as 8-bit gray when every pixel is gray (lossless: a third of the data)."""
    import numpy as np

    pixels = np.asarray(image)
    red, green, blue = pixels[..., 0], pixels[..., 1], pixels[..., 2]
    gray = bool((red == green).all() and (green == blue).all())
    (image.convert("L") if gray else image).save(buffer, format="PNG", compress_level=1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--capacities", type=float, nargs="+", default=[10.0, 40.0, 80.0])
    parser.add_argument("--repeat", type=int, default=1, help="runs per capacity (medians)")
    parser.add_argument("--documents", nargs="+", default=list(DOCUMENTS))
    parser.add_argument("--no-studies", action="store_true", help="skip transport/encoding")
    parser.add_argument(
        "--split-pages",
        type=int,
        default=0,
        help="ocrflow's --split-pages (0: its default, 500, which splits DA-619p into ranges)",
    )
    args = parser.parse_args(argv)
    documents = [(CORPUS / name).resolve() for name in args.documents]
    missing = [str(d) for d in documents if not d.is_file()]
    if missing:
        raise SystemExit(f"missing corpus files: {missing}")
    print(f"ocrflow vs fakevllm: {MAX_NUM_SEQS} max sequences, {TOKENS_PER_PAGE} tokens a page;")
    print(f"documents: {', '.join(d.name for d in documents)}; {os.cpu_count()} CPUs (shared)")
    for capacity in args.capacities:
        cases = [run_case(capacity, documents, args.split_pages) for _ in range(args.repeat)]
        print_case(median_case(cases))
        sys.stdout.flush()
    if args.no_studies:
        return 0
    print("\n== transport: client CPU per request through OpenAIEngine (40 pages/s server) ==")
    for label, ms in transport_study().items():
        print(f"  {label:24s} {ms:6.2f} ms")
    print("\n== image encoding, per page (1288 px longest side) ==")
    print(f"  {'encoding':24s} {'CPU ms':>7s} {'KiB':>7s} {'b64+JSON ms':>12s}")
    for name, (cpu_ms, kib, wire_ms) in encoding_study(documents).items():
        print(f"  {name:24s} {cpu_ms:7.1f} {kib:7.0f} {wire_ms:12.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
