"""In-flight ramp of ``ocrflow run`` against a test server: ``--engine openai`` (a server that
runs already) against ``--engine vllm`` (ocrflow starts the server itself), same pages.

    .venv/bin/python bench/bench_managed_ramp.py [--pages 300] [--modes openai,vllm]

The managed server is tests/fakevllm started through this file's ``serve`` mode, which
takes ``vllm serve``'s command line (``serve MODEL --host H --port P --served-model-name N
FLAGS``). The server's ``/metrics`` (running / waiting) is sampled every 0.25 s from the
moment it answers; printed per mode: pages/s from readiness to the end, the mean running
count, and the running count by second after readiness (issue 12: the managed run held
fewer requests running than the openai run on one H100).

``--cold-s S``: the managed server's steps are 10x slower for S s from its first request,
as on a server that never served (the GPU bench's (c); (a) warms up, (b) follows (a)).
``--modes engine``: ``OpenAIEngine`` alone, all pages at once, no rendering (less noise).
``--no-regrow``: the limiter as before issue 12's fix. ``--trace-dir``: limiter steps.
``--start N`` (engine mode): the limit's first value instead of 32 (N >= pages: every page
sent at once, the bare client's way).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tests.fakevllm.process import running_server  # noqa: E402

CORPUS = REPO.parent / "shared" / "corpus" / "pdfs"
DOC = "unstructured__DA-619p.pdf"
MODEL = "bench-model"


def server_flags(args: argparse.Namespace) -> list[str]:
    """The fake server's capacity flags."""
    return [
        "--max-num-seqs", str(args.max_num_seqs), "--pages-per-s", str(args.pages_per_s),
        "--tokens-per-page", str(args.tokens_per_page), "--reply-format", "markdown",
        "--base-fraction", "0.2",
    ]  # fmt: skip


class Sampler:
    """Polls ``/metrics`` of one server in a thread: (seconds, running, waiting) rows."""

    def __init__(self) -> None:
        self.rows: list[tuple[float, float, float]] = []
        self.url: str | None = None
        self.ready_at: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self, url: str | None) -> None:
        self.url = url
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        with httpx.Client(timeout=2.0) as client:
            while not self._stop.is_set():
                if self.url is not None:
                    self._sample(client)
                self._stop.wait(0.25)

    def _sample(self, client: httpx.Client) -> None:
        try:
            text = client.get(f"{self.url}/metrics").text
        except httpx.HTTPError:
            return
        if self.ready_at is None:
            self.ready_at = time.perf_counter()
        values = {"running": 0.0, "waiting": 0.0}
        for line in text.splitlines():
            for key in values:
                if line.startswith(f"vllm:num_requests_{key}{{"):
                    values[key] = float(line.rsplit(" ", 1)[1])
        self.rows.append((time.perf_counter(), values["running"], values["waiting"]))


def run_command(mode: str, out: Path, args: argparse.Namespace, url: str | None) -> list[str]:
    """The ``ocrflow run`` command line of one mode."""
    command = [
        sys.executable, __file__, "cli", "run", str(CORPUS / DOC), "-o", str(out),
        "--pages", f"1-{args.pages}", "--text-layer", "off", "--recipe", "markdown",
        "--split-pages", "25", "--json", "-q", "--engine", mode,
        "--target-dim", str(args.target_dim),
    ]  # fmt: skip
    if mode == "openai":
        return [*command, "--server", str(url), "--model", MODEL]
    ready = out.parent / f"{out.name}.url"
    cold = ["--cold-s", str(args.cold_s)] if args.cold_s else []
    fake = " ".join([*server_flags(args), *cold, "--ready-file", str(ready)])
    return [
        *command, "--model", MODEL,
        "--vllm-command", f"{sys.executable} {Path(__file__).resolve()} serve",
        "--vllm-arg", fake,
    ]  # fmt: skip


def measure(mode: str, tmp: Path, args: argparse.Namespace) -> dict[str, object]:
    """One run of ``mode``; the figures after the server first answered ``/metrics``."""
    out = tmp / f"out-{mode}"
    if args.no_regrow:
        os.environ["RAMP_NO_REGROW"] = "1"
    if args.trace_dir:
        os.environ["RAMP_TRACE"] = str(Path(args.trace_dir) / f"trace-{mode}.jsonl")
    sampler = Sampler()
    if mode == "openai":
        with running_server(*server_flags(args), "--model", MODEL) as server:
            sampler.start(server.url)
            started = time.perf_counter()
            done = subprocess.run(run_command(mode, out, args, server.base_url),
                                  capture_output=True, text=True, check=False)  # fmt: skip
            ended = time.perf_counter()
            sampler.stop()
    else:
        ready = tmp / f"out-{mode}.url"
        sampler.start(None)
        started = time.perf_counter()
        proc = subprocess.Popen(run_command(mode, out, args, None), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)  # fmt: skip
        while proc.poll() is None and sampler.url is None:
            if ready.exists() and ready.read_text().strip():
                sampler.url = ready.read_text().split()[-1].removeprefix("LISTENING ")
            time.sleep(0.05)
        stdout, stderr = proc.communicate()
        ended = time.perf_counter()
        sampler.stop()
        done = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    if done.returncode != 0:
        sys.exit(f"{mode}: ocrflow exited {done.returncode}: {done.stderr[-3000:]}")
    summary = json.loads(done.stdout)
    ready_at = sampler.ready_at or started
    rows = [(t - ready_at, r, w) for t, r, w in sampler.rows]
    busy = [r for _, r, _ in rows if r > 0]
    by_second = {}
    for t, r, _ in rows:
        by_second.setdefault(int(t), r)  # the first sample of each second
    return {
        "mode": mode,
        "pages": sum(summary["pages"].values()),
        "after_ready_s": round(ended - ready_at, 2),
        "pages_per_s_after_ready": round(sum(summary["pages"].values()) / (ended - ready_at), 2),
        "mean_running": round(sum(busy) / max(1, len(busy)), 1),
        "first_running_s": next((round(t, 2) for t, r, _ in rows if r > 0), None),
        "peak_running": max((r for _, r, _ in rows), default=0),
        "running_by_s": [by_second.get(s, 0) for s in range(args.seconds)],
    }


def _cold_engine(cold_s: float, factor: float) -> None:
    """A server that never served: its steps are ``factor`` times slower for ``cold_s``
    seconds from its first step (kernels compiled and caches filled on first use)."""
    import dataclasses

    from tests.fakevllm import engine, server

    make = server.capacity_from_args
    first: list[float] = []  # the first call is the parser's check, not a step

    def cold() -> bool:
        return len(first) > 1 and time.monotonic() - first[1] < cold_s

    @dataclasses.dataclass(frozen=True)
    class Cold(server.Capacity):  # type: ignore[misc]
        def step_time(self, running: int) -> float:
            if len(first) < 2:
                first.append(time.monotonic())
            return super().step_time(running) * (factor if cold() else 1.0)

    def capacity(args: argparse.Namespace) -> server.Capacity:
        base = make(args)
        return Cold(base.max_num_seqs, base.step_base_s, base.step_per_seq_s)

    # The engine sleeps through several steps at the pace of the first; while cold, one at a
    # time, or a big first batch would stay at the cold pace long after the cold window.
    steps_to_next_finish = engine.Engine._steps_to_next_finish

    def one_step_while_cold(self: engine.Engine) -> int:
        return 1 if cold() else steps_to_next_finish(self)

    engine.Engine._steps_to_next_finish = one_step_while_cold  # type: ignore[method-assign]
    server.capacity_from_args = capacity


def measure_engine(args: argparse.Namespace, cold_s: float) -> dict[str, object]:
    """``OpenAIEngine`` alone (no rendering, no CLI) against a fresh test server: every page
    ready at once, as when pages were rendered while the server loaded. Limiter steps are
    sampled at each poll; ``--no-regrow`` gives the limiter as it was before issue 12."""
    import asyncio
    import hashlib

    from ocrflow.engines.openai import OpenAIEngine
    from ocrflow.types import PageImage, PageRequest

    cold = ["--cold-s", str(cold_s)] if cold_s else []
    command = [sys.executable, __file__, "serve", MODEL, "--port", "0", *server_flags(args), *cold]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    url = proc.stdout.readline().split()[-1]

    def page(i: int) -> PageRequest:
        data = hashlib.sha256(str(i).encode()).digest() * 64
        return PageRequest(image=PageImage(data, 100, 100, "png"), prompt="Convert.")

    async def main() -> tuple[float, list[tuple[float, float]]]:
        engine = OpenAIEngine([url], MODEL)
        for replica in engine.replicas:
            if args.no_regrow:  # a queue once seen holds growth at 25 % for good
                replica.limiter.regrow_factor = math.inf
            if args.start:
                replica.limiter.limit = float(args.start)
        await engine.wait_ready(30)
        started = time.perf_counter()
        tasks = [asyncio.create_task(engine.infer(page(i))) for i in range(args.pages)]
        rows = []
        while not all(t.done() for t in tasks):
            state = engine.snapshot()[0]
            rows.append((time.perf_counter() - started, state.get("running", 0.0)))
            await asyncio.sleep(0.25)
        await asyncio.gather(*tasks)
        wall = time.perf_counter() - started
        await engine.aclose()
        return wall, rows

    try:
        wall, rows = asyncio.run(main())
    finally:
        proc.terminate()
        proc.wait()
    full = next((t for t, r in rows if r >= args.max_num_seqs), None)
    busy = [r for _, r in rows if r > 0]
    by_second: dict[int, float] = {}
    for t, r in rows:
        by_second.setdefault(int(t), r)
    return {
        "mode": f"engine cold_s={cold_s:g}"
        + (" no-regrow" if args.no_regrow else "")
        + (f" start={args.start}" if args.start else ""),
        "pages": args.pages,
        "wall_s": round(wall, 2),
        "pages_per_s": round(args.pages / wall, 2),
        "mean_running": round(sum(busy) / max(1, len(busy)), 1),
        "full_batch_at_s": None if full is None else round(full, 2),
        "running_by_s": [by_second.get(s, 0) for s in range(args.seconds)],
    }


def serve(argv: list[str]) -> None:
    """``vllm serve MODEL --host H --port P --served-model-name N FLAGS`` -> fakevllm."""
    from tests.fakevllm.server import main

    parser = argparse.ArgumentParser(prog="vllm serve")
    parser.add_argument("model")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--served-model-name")
    parser.add_argument("--limit-mm-per-prompt")  # a recipe flag the test server lacks
    parser.add_argument("--cold-s", type=float, default=0.0)
    parser.add_argument("--cold-factor", type=float, default=10.0)
    known, rest = parser.parse_known_args(argv)
    name = known.served_model_name or known.model
    if known.cold_s > 0:
        _cold_engine(known.cold_s, known.cold_factor)
    sys.exit(main(["--host", known.host, "--port", str(known.port), "--model", name, *rest]))


def traced_cli(argv: list[str]) -> None:
    """``ocrflow`` with every limiter step of the engine appended to ``$RAMP_TRACE`` (JSON
    lines: time, running, waiting, in flight, saturated, limit after the step)."""
    from ocrflow import cli
    from ocrflow.engines.limiter import ReplicaLimiter

    trace = os.environ.get("RAMP_TRACE")
    old_limiter = bool(os.environ.get("RAMP_NO_REGROW"))
    original = ReplicaLimiter.on_metrics

    def on_metrics(self: ReplicaLimiter, running: float, waiting: float, in_flight: int,
                   saturated: bool) -> None:  # fmt: skip
        if old_limiter:
            self.regrow_factor = math.inf
        original(self, running, waiting, in_flight, saturated)
        if trace:
            row = [round(time.time(), 3), running, waiting, in_flight, saturated, self.limit]
            with open(trace, "a", encoding="utf-8") as out:
                out.write(json.dumps(row) + "\n")

    ReplicaLimiter.on_metrics = on_metrics  # type: ignore[method-assign]
    sys.argv = ["ocrflow", *argv]
    cli.main()


def main() -> None:
    """Run each mode once and print its ramp."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pages", type=int, default=300)
    parser.add_argument("--modes", default="openai,vllm")
    parser.add_argument("--max-num-seqs", type=int, default=400)
    parser.add_argument("--pages-per-s", type=float, default=10.0)
    parser.add_argument("--tokens-per-page", type=int, default=100)
    parser.add_argument("--target-dim", type=int, default=512, help="small: fast rendering")
    parser.add_argument(
        "--cold-s",
        type=float,
        default=0.0,
        help="managed server: steps 10x slower for this long at first",
    )
    parser.add_argument(
        "--no-regrow", action="store_true", help="the limiter before issue 12's fix"
    )
    parser.add_argument("--start", type=int, default=0, help="engine mode: first limit")
    parser.add_argument("--trace-dir", help="write each run's limiter steps here")
    parser.add_argument("--seconds", type=int, default=12, help="ramp columns printed")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for mode in args.modes.split(","):
            if mode == "engine":
                print(json.dumps(measure_engine(args, args.cold_s)), flush=True)
            else:
                print(json.dumps(measure(mode, Path(tmp), args)), flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        serve(sys.argv[2:])
    elif sys.argv[1:2] == ["cli"]:
        traced_cli(sys.argv[2:])
    else:
        main()
