"""Where a py-spy profile of ``ocrflow run`` spends its CPU, by the steps issue 21 names.

    python bench/gpu/pyspy_summary.py PROFILE.txt [--rate 25]

PROFILE is ``py-spy record --format raw --subprocesses`` output (one folded stack and its
sample count a line), as ``bench_gpu.py ocrflow --pyspy FILE`` writes it. Each stack goes to
the first step whose frame it holds (render workers and main process together).
"""

from __future__ import annotations

import argparse
import collections
from pathlib import Path

STEPS = (
    ("PNG encoding (render/jobs.py:encode_image)", ("encode_image",)),
    ("PDFium rendering (render/pdf.py)", ("render_pdf_page",)),
    ("blank-page check", ("render/blank.py",)),
    ("text layer, page objects", ("textlayer", "textstats", "textblocks", "pageobjects")),
    ("request body: JSON + base64", ("request_body",)),
    ("/metrics parsing", ("parse_vllm_metrics", "prometheus_client")),
    ("HTTP (httpx)", ("httpx", "httpcore", "h11", "anyio", "ssl.py")),
    ("imports", ("importlib",)),
    ("outputs, workspace", ("sinks/", "workspace", "storage/")),
    ("pool IPC", ("pebble", "multiprocessing", "pickle")),
)


def step_of(stack: str) -> str:
    """The step a folded stack belongs to."""
    for name, needles in STEPS:
        if any(needle in stack for needle in needles):
            return name
    return "other"


def main() -> None:
    """Print CPU seconds and shares by step."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile", type=Path)
    parser.add_argument("--rate", type=float, default=25.0, help="py-spy samples a second")
    args = parser.parse_args()
    counts: collections.Counter[str] = collections.Counter()
    for line in args.profile.read_text().splitlines():
        stack, _, samples = line.rpartition(" ")
        if samples.isdigit():
            counts[step_of(stack)] += int(samples)
    total = sum(counts.values()) or 1
    print(f"{total / args.rate:.1f} CPU-s sampled")
    for name, samples in counts.most_common():
        print(f"{samples / args.rate:7.1f} s  {100 * samples / total:5.1f} %  {name}")


if __name__ == "__main__":
    main()
