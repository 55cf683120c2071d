"""Ray Data against ``ocrflow run`` on the same pages, the embedded engine, N CPUs.

    .venv/bin/python bench/bench_ray_data.py [--cpus 2] [--copies 2] [--repeat 2]

The pages: the bundled examples plus a few corpus scans (``--copies`` times each, under
other names, so there is enough work for every core), all read by OCR (``--text-layer
off``). Back to back, ``--repeat`` times each, alternated:

* ``ocrflow run DIR -o OUT --text-layer off --parallel CPUS --threads 1`` (wall time of the
  command);
* a driver with ``ray.init(num_cpus=CPUS)``: ``read_binary_files(DIR)`` ->
  ``map_batches(DocumentConverter, concurrency=CPUS, batch_size=1)`` with one page at a time
  and one thread per actor -> ``take_all`` (wall time of the script, Ray's start included,
  and the same without it: the time from the first row read to the last row back).

Prints pages/s of each, and Ray Data's as a ratio to ``ocrflow run``'s measured in the same
run. Needs ``ocrflow[ray]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "corpus"
EXAMPLES = REPO / "examples"
RAY_ENV = {"RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0", "RAY_DATA_DISABLE_PROGRESS_BARS": "1"}

DRIVER = """
import json, logging, sys, time
started = time.monotonic()
import ray
from ocrflow.ray_data import DocumentConverter

folder, cpus = sys.argv[1], int(sys.argv[2])
ray.init(num_cpus=cpus, include_dashboard=False, logging_level=logging.WARNING)
ready = time.monotonic()
# The read task and CPUS actors share CPUS cores: an actor that asked for a whole core each
# would leave the read task none, and the job would wait for ever.
ds = ray.data.read_binary_files(folder, include_paths=True, ray_remote_args={"num_cpus": 0.1})
rows = ds.map_batches(
    DocumentConverter,
    fn_constructor_kwargs={
        "root": folder, "engine": "embedded", "text_layer": "off", "workers": 1,
        "parallel": 1, "threads": 1,
    },
    concurrency=cpus,
    num_cpus=(cpus - 0.1) / cpus,
    batch_size=1,
).take_all()
done = time.monotonic()
print(json.dumps({
    "pages": sum(int(r["n_pages"] or 0) for r in rows),
    "ok": sum(r["status"] == "ok" for r in rows),
    "rows": len(rows),
    "ray_start_s": ready - started,
    "convert_s": done - ready,
}))
"""


def _inputs(folder: Path, copies: int, images: Path = CORPUS / "images") -> None:
    """The examples and up to four corpus scans (from ``images``), ``copies`` times each."""
    sources = [p for p in sorted(EXAMPLES.iterdir()) if p.is_file()]
    scans = sorted(images.glob("*")) if images.is_dir() else []
    sources += [p for p in scans if p.suffix.lower() in {".png", ".jpg", ".jpeg", ".tif"}][:4]
    folder.mkdir(parents=True)
    for copy in range(copies):
        for source in sources:
            shutil.copyfile(source, folder / f"c{copy}-{source.name}")


def _ocrflow_run(folder: Path, out: Path, cpus: int) -> tuple[float, int]:
    started = time.monotonic()
    done = subprocess.run(
        [
            *(sys.executable, "-m", "ocrflow.cli", "run", str(folder), "-o", str(out), "-q"),
            *("--json", "--text-layer", "off", "--parallel", str(cpus), "--threads", "1"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.monotonic() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"ocrflow run failed: {done.stderr[-2000:]}")
    summary = json.loads(done.stdout)
    return wall, sum(int(n) for n in summary["pages"].values())


def _ray_data(folder: Path, cpus: int) -> dict[str, float]:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, str(folder), str(cpus)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **RAY_ENV},
    )
    if done.returncode != 0:
        raise SystemExit(f"Ray Data driver failed: {done.stderr[-2000:]}")
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    figures["wall_s"] = time.monotonic() - started
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpus", type=int, default=2)
    parser.add_argument("--copies", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument(
        "--images", type=Path, default=CORPUS / "images", help="folder of the corpus scans"
    )
    parser.add_argument("--results", type=Path, help="also append the figures here (JSON)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "pages"
        _inputs(folder, args.copies, args.images)
        run_rates, ray_rates, ray_busy = [], [], []
        for attempt in range(args.repeat):
            wall, pages = _ocrflow_run(folder, Path(tmp) / f"out{attempt}", args.cpus)
            run_rates.append(pages / wall)
            ray = _ray_data(folder, args.cpus)
            ray_rates.append(ray["pages"] / ray["wall_s"])
            ray_busy.append(ray["pages"] / ray["convert_s"])
            print(
                f"try {attempt + 1}: ocrflow run {pages} pages in {wall:.1f} s; "
                f"Ray Data {int(ray['pages'])} pages ({int(ray['ok'])}/{int(ray['rows'])} ok) "
                f"in {ray['wall_s']:.1f} s (Ray start {ray['ray_start_s']:.1f} s)"
            )
    run, whole, busy = (statistics.median(r) for r in (run_rates, ray_rates, ray_busy))
    print(f"\n{args.cpus} CPUs, embedded engine, {os.cpu_count()} cores on this machine")
    print(f"ocrflow run:            {run:.3f} pages/s")
    print(f"Ray Data (whole):       {whole:.3f} pages/s  ratio {whole / run:.2f}")
    print(f"Ray Data (after start): {busy:.3f} pages/s  ratio {busy / run:.2f}")
    if args.results:
        figures = {
            "bench": "ray_data", "cpus": args.cpus, "cores": os.cpu_count(), "pages": pages,
            "ocrflow_run_pages_per_s": round(run, 3), "ray_whole_pages_per_s": round(whole, 3),
            "ray_after_start_pages_per_s": round(busy, 3),
            "ray_start_s": round(ray["ray_start_s"], 1),
        }  # fmt: skip
        with args.results.open("a", encoding="utf-8") as out:
            out.write(json.dumps(figures) + "\n")


if __name__ == "__main__":
    main()
