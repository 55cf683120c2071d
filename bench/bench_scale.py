"""Scale-out: 1, 2 and 4 ocrflow worker processes on one workspace, two test servers.

    .venv/bin/python bench/bench_scale.py [--pages 600]

Starts two fake vLLM servers (tests/fakevllm) of 5 pages/s each (10 pages/s in all), plans a
run on a fixed set of real corpus PDFs, then starts N workers (`ocrflow run` + N-1
`ocrflow worker`) on the same OUT, all sending to both servers. Prints aggregate pages/s
divided by the total server capacity, and duplicate page requests (the servers count every
request per image; requests beyond one per page are duplicates).
Goal (issue 4): ratio >= 0.9 with 2+ workers, 0 duplicates.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tests.fakevllm.process import running_server  # noqa: E402

CORPUS = REPO.parent / "shared" / "corpus" / "pdfs"
DOCS = ["unstructured__DA-619p.pdf", "pdf2image__test_241.pdf", "pdfjs__freeculture.pdf"]
SERVER_FLAGS = (
    "--pages-per-s",
    "5",
    "--max-num-seqs",
    "32",
    "--tokens-per-page",
    "100",
    "--reply-format",
    "markdown",
    "--model",
    "bench-model",
    "--base-fraction",
    "0.2",
)


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "ocrflow.cli", *args]


def run_workers(n: int, urls: list[str], pages: int, tmp: Path) -> dict[str, float]:
    """One measured run with ``n`` workers; returns wall time and pages done."""
    out = tmp / f"out-{n}"
    servers = [a for url in urls for a in ("--server", url)]
    common = [*servers, "--workers", "1", "-q", "--json"]
    run = _cli(
        "run",
        *(str(CORPUS / d) for d in DOCS),
        "-o",
        str(out),
        "--pages",
        f"1-{pages // len(DOCS)}",
        "--text-layer",
        "off",
        "--engine",
        "openai",
        "--model",
        "bench-model",
        "--recipe",
        "markdown",
        "--split-pages",
        "25",
        *common,
    )
    started = time.perf_counter()
    procs = [subprocess.Popen(run, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)]
    time.sleep(1.0)  # the first process plans the run; the others join it
    for _ in range(n - 1):
        procs.append(
            subprocess.Popen(
                _cli("worker", str(out), *common),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    done = sent = 0
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=3600)
        if proc.returncode not in (0, 1):
            sys.exit(f"worker failed: {stderr[-2000:]}")
        summary = json.loads(stdout)
        done += sum(summary["pages"].values())
        sent += summary["routes"].get("engine", 0) + summary["routes"].get("fallback", 0)
    return {"wall_s": time.perf_counter() - started, "pages": done, "sent": sent}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pages", type=int, default=600)
    parser.add_argument("--workers", default="1,2,4")
    args = parser.parse_args()
    capacity = 10.0
    print(f"two test servers x 5 pages/s = {capacity:.0f} pages/s; {args.pages} pages a run")
    print(f"{'workers':>7} {'pages':>6} {'wall s':>7} {'pages/s':>8} {'ratio':>6} {'dup req':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(w) for w in args.workers.split(",")):
            with running_server(*SERVER_FLAGS) as a, running_server(*SERVER_FLAGS) as b:
                result = run_workers(n, [a.base_url, b.base_url], args.pages, Path(tmp))
                requests = sum(a.stats()["images"].values()) + sum(b.stats()["images"].values())
            # No faults are injected, so every page is sent exactly once unless two workers
            # did the same item (identical pages of a document are distinct requests).
            duplicates = requests - int(result["sent"])
            rate = result["pages"] / result["wall_s"]
            print(
                f"{n:>7} {result['pages']:>6.0f} {result['wall_s']:>7.1f} {rate:>8.2f} "
                f"{rate / capacity:>6.2f} {duplicates:>8}"
            )
    print("ratio = aggregate pages/s / total server capacity (whole run, start-up included)")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
