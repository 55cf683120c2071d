"""The embedded engine's thread layout on 2, 4 and 16 cores (issue 18), whole ``ocrflow run``.

    python3 bench/gpu/cpu_scaling.py --images DIR --copies 2 --results FILE \\
        --layouts 2:default,2:2x1,4:default,4:4x1,16:default,16:16x1 [--cpus 2=0,1;4=0-3]

The pages are ``bench/bench_ray_data.py``'s (the bundled examples and four corpus scans,
``--copies`` times each), all read by OCR (``--text-layer off``). Each layout ``N:PxT`` runs
``ocrflow run`` under ``taskset`` on N CPUs with ``--parallel P --threads T`` (and
``--workers`` P, at most 4); ``N:default`` gives no sizing flag, so ocrflow sizes itself as
it would on that machine (``os.cpu_count()``, which ``taskset`` does not change). One JSON
line a run: wall time of the whole command, pages/s, CPU seconds of the process tree.
With ``tesseract`` on PATH, ``N:tesseract`` runs ``--engine tesseract`` the same way.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench_ray_data import _inputs


def _cpu_list(cores: int, lists: dict[int, str]) -> str:
    return lists.get(cores, f"0-{cores - 1}")


def _flags(layout: str) -> list[str]:
    if layout == "default":
        return []
    if layout == "tesseract":
        return ["--engine", "tesseract"]
    parallel, _, threads = layout.partition("x")
    workers = min(4, int(parallel))
    return ["--parallel", parallel, "--threads", threads, "--workers", str(workers)]


def run_one(folder: Path, out: Path, cores: int, layout: str, cpus: str) -> dict[str, object]:
    """One ``ocrflow run`` on ``cpus``; its wall time, pages and CPU seconds."""
    command = [
        "taskset", "-c", cpus, sys.executable, "-m", "ocrflow.cli", "run", str(folder),
        "-o", str(out), "-q", "--json", "--text-layer", "off", *_flags(layout),
    ]  # fmt: skip
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stdout, stderr = proc.communicate()
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # The render workers are reaped by ocrflow, so their CPU is in its children's total.
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode not in (0, 1):
        return {"cores": cores, "layout": layout, "error": stderr[-1500:]}
    summary = json.loads(stdout.strip().splitlines()[-1])
    pages = sum(int(n) for n in summary["pages"].values())
    return {
        "bench": "cpu_scaling", "cores": cores, "cpus": cpus, "layout": layout,
        "pages": pages, "wall_s": round(wall, 2), "pages_per_s": round(pages / wall, 3),
        "cpu_s": round(cpu, 1), "cores_busy": round(cpu / wall, 2),
        "ocrflow_pages_per_s": summary.get("pages_per_s"), "routes": summary.get("routes"),
    }  # fmt: skip


def main() -> None:
    """Run every layout, print and append one JSON line each."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=Path, required=True)
    parser.add_argument("--copies", type=int, default=2)
    parser.add_argument("--layouts", default="2:default,2:2x1,4:default,4:4x1,16:default,16:16x1")
    parser.add_argument("--cpus", default="", help="CPU lists by core count: 2=0,8;4=0-1,8-9")
    parser.add_argument("--results", type=Path, required=True)
    args = parser.parse_args()
    lists = {}
    for item in filter(None, args.cpus.split(";")):
        count, _, cpus = item.partition("=")
        lists[int(count)] = cpus
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "pages"
        _inputs(folder, args.copies, args.images)
        # Imports, models and the page files into the caches once, untimed.
        warm = Path(tmp) / "warm"
        warm.mkdir()
        shutil.copy(next(p for p in sorted(folder.iterdir()) if p.suffix == ".png"), warm)
        run_one(warm, Path(tmp) / "warm-out", 16, "default", _cpu_list(os.cpu_count() or 1, {}))
        for index, item in enumerate(args.layouts.split(",")):
            cores, _, layout = item.partition(":")
            if layout == "tesseract" and not shutil.which("tesseract"):
                continue
            result = run_one(
                folder, Path(tmp) / f"out{index}", int(cores), layout,
                _cpu_list(int(cores), lists),
            )  # fmt: skip
            print(json.dumps(result), flush=True)
            with args.results.open("a", encoding="utf-8") as out:
                out.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
