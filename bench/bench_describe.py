"""The describe stage against the fake VLM server: figures/s against the server's capacity,
and the client's CPU per figure.

Run: ``.venv/bin/python bench/bench_describe.py`` (about 2 minutes; ``--help`` for options).

For each capacity (default 20 and 80 figures/s) a fresh ``tests.fakevllm.server`` starts
with ``--max-num-seqs 128``, 100 output tokens a request and ``--pages-per-s C`` (a figure
request costs the engine as much as a page, so its full-batch capacity is C figures/s).
An OUT is laid out as extract leaves it (the real ``FigureSink`` and done markers:
``--documents`` documents of ``--figures`` figures, each crop a distinct 256x192 PNG of
~60 KB), then the real CLI runs ``ocrflow describe OUT --json``. Printed per capacity:

- ``ratio``: figures / wall time of the whole command (Python start-up included) / C;
- ``stage ratio``: figures / the stage's own elapsed time (engine ready to last answer
  written, from ``--json``) / C;
- ``ideal ratio``: the time a perfect client needs (all figures at t=0: full batches of
  128, then one smaller, faster batch) / our wall time;
- client CPU seconds per figure: the whole process (user+sys, start-up included) and the
  stage alone (``cpu_s`` of ``--json``); the server's own CPU per figure beside.
"""

from __future__ import annotations

import argparse
import io
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ocrflow.config import EngineOptions, RunConfig  # noqa: E402
from ocrflow.sinks import DocumentMeta, FigureSink, FinishedDocument  # noqa: E402
from ocrflow.storage.local import LocalStore  # noqa: E402
from ocrflow.types import (  # noqa: E402
    DocStatus,
    DocumentResult,
    Figure,
    PageResult,
    PageStatus,
    Route,
)
from ocrflow.workspace.state import Workspace  # noqa: E402
from tests.fakevllm.process import running_server  # noqa: E402

MAX_NUM_SEQS = 128
TOKENS = 100


def _crop(rng: random.Random) -> bytes:
    image = Image.frombytes("RGB", (256, 192), rng.randbytes(256 * 192 * 3))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", compress_level=1)
    return buffer.getvalue()


def make_out(out: Path, documents: int, figures: int, seed: int = 0) -> int:
    """An OUT as extract leaves it: documents of one page with ``figures`` figures each."""
    rng = random.Random(seed)
    store = LocalStore(out)
    workspace = Workspace(store)
    config = RunConfig(
        inputs=("bench",), output=str(out), engine=EngineOptions(kind="openai", model="ocr")
    )
    workspace.bind(config)
    sink = FigureSink(store)
    for number in range(documents):
        crops = tuple(
            Figure(1, i, "image", (0.1, 0.1, 0.5, 0.5), _crop(rng)) for i in range(figures)
        )
        text = "Text\n\n" + "\n\n".join(f.placeholder for f in crops)
        page = PageResult(1, text, Route.ENGINE, PageStatus.OK, figures=crops)
        result = DocumentResult(f"doc{number:05d}", f"/in/{number}.pdf", DocStatus.OK, (page,), 1)
        meta = DocumentMeta(f"{number}.pdf", "", None, "openai:ocr", config.fingerprint())
        sink.write(FinishedDocument(result, meta))
        workspace.mark_done(result)
    return documents * figures


@dataclass
class Case:
    capacity: float
    figures: int
    wall_s: float
    stage: dict[str, float]
    cpu_s: float
    server_cpu_s: float

    @property
    def ratio(self) -> float:
        return self.figures / self.wall_s / self.capacity

    @property
    def stage_ratio(self) -> float:
        return self.figures / self.stage["elapsed_s"] / self.capacity

    def ideal_ratio(self) -> float:
        full, rest = divmod(self.figures, MAX_NUM_SEQS)
        step_full = MAX_NUM_SEQS / (self.capacity * TOKENS)  # --base-fraction 0.5
        step_rest = step_full * (0.5 + 0.5 * rest / MAX_NUM_SEQS)
        ideal = (full * step_full + (step_rest if rest else 0.0)) * TOKENS
        return ideal / self.wall_s


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_case(capacity: float, documents: int, figures: int) -> Case:
    flags = ("--model", "describe-vlm", "--max-num-seqs", MAX_NUM_SEQS)
    flags += ("--tokens-per-page", TOKENS, "--pages-per-s", capacity)
    with tempfile.TemporaryDirectory() as folder, running_server(*flags) as server:
        out = Path(folder) / "out"
        total = make_out(out, documents, figures)
        command = [
            sys.executable, "-m", "ocrflow.cli", "describe", str(out),
            "--server", server.base_url, "--model", "describe-vlm", "--json", "-q",
        ]  # fmt: skip
        server_cpu0, cpu0, start = server.cpu_seconds(), _children_cpu(), time.monotonic()
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        wall = time.monotonic() - start
        cpu = _children_cpu() - cpu0
        if done.returncode != 0:
            raise SystemExit(done.stderr[-3000:])
        stage = json.loads(done.stdout)
        assert stage["described"] == total, stage
        received = server.stats()["received"]
        assert received == total, f"{received} requests for {total} figures"
        return Case(capacity, total, wall, stage, cpu, server.cpu_seconds() - server_cpu0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--capacities", type=float, nargs="+", default=[20.0, 80.0])
    parser.add_argument("--seconds", type=float, default=30.0, help="ideal seconds a case")
    parser.add_argument("--figures", type=int, default=4, help="figures a document")
    args = parser.parse_args()
    for capacity in args.capacities:
        documents = max(1, round(capacity * args.seconds / args.figures))
        case = run_case(capacity, documents, args.figures)
        n = case.figures
        print(
            f"capacity {capacity:g} figures/s, {n} figures ({documents} documents): "
            f"{n / case.wall_s:.1f} figures/s, ratio {case.ratio:.3f}, "
            f"stage ratio {case.stage_ratio:.3f}, ideal ratio {case.ideal_ratio():.3f}; "
            f"client CPU {case.cpu_s / n * 1000:.2f} ms/figure "
            f"(stage {case.stage['cpu_s'] / n * 1000:.2f} ms), "
            f"server CPU {case.server_cpu_s / n * 1000:.2f} ms/figure",
            flush=True,
        )


if __name__ == "__main__":
    main()
