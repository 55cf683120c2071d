"""Pages/s of real vLLM on a GPU: a bare client (the ideal) beside ocrflow's whole pipeline.

Runs ON the GPU machine (see ``bench/gpu/README.md`` for the calls), and here against the
fake server for a dry run. Sub-commands, each appending one JSON line to ``--results``:

- ``bare``: every page rendered by ocrflow's own renderer (olmOCR size, PNG as ocrflow
  sends it) and its request body built and encoded *before* the clock starts; then all
  requests go out with at most ``--concurrency`` in flight (default: all of them) over one
  aiohttp session. Nothing else runs: this is what the server can do.
- ``ocrflow``: ``bench/gpu/ocrflow_bench.py run PDFS ...`` (the real CLI) with ``--engine
  openai`` against the same server, or ``--engine vllm`` (ocrflow starts vLLM itself).
- ``table``: the results file as a Markdown table.

While a client runs, vLLM's ``/metrics`` (requests running and waiting, KV-cache use,
token counters) and ``nvidia-smi`` (GPU utilisation, memory, power) are sampled every
0.5 s; the figures are averaged over the busy window (from the first to the last sample
with a request at the server). Every page decodes exactly ``--max-tokens`` tokens
(``ignore_eos``): a model with random weights never stops by itself.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import aiohttp
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from client_cpu import TreeCpu
from sampler import Sampler, metrics_url

HERE = Path(__file__).resolve().parent
MODEL = "olmocr"


# -- pages ---------------------------------------------------------------------------------
def page_numbers(spec: str, count: int) -> list[int]:
    """``all`` or ``A-B`` (1-based, inclusive, clipped to the document) as page numbers."""
    if spec == "all":
        return list(range(1, count + 1))
    first, _, last = spec.partition("-")
    return list(range(int(first), min(int(last or first), count) + 1))


def _render_chunk(args: tuple[str, tuple[int, ...], int]) -> list[Any]:
    """One worker's share: ocrflow's renderer, PNG as ocrflow puts it on the wire."""
    from ocrflow.render.jobs import PageJob, RenderSpec, render_pages

    path, pages, target_dim = args
    spec = RenderSpec(target_dim=target_dim, text_layer="off", encoding="png")
    return [page.image for page in render_pages(PageJob(path, "pdf", pages, spec))]


def render_all(pdfs: list[str], spec: str, target_dim: int, workers: int) -> list[Any]:
    """Every page's ``PageImage`` (blank pages, which ocrflow does not send, left out)."""
    import pypdfium2 as pdfium

    chunks = []
    for path in pdfs:
        pdf = pdfium.PdfDocument(path)
        numbers = page_numbers(spec, len(pdf))
        pdf.close()
        chunks += [(path, tuple(numbers[i : i + 8]), target_dim) for i in range(0, len(numbers), 8)]
    with ProcessPoolExecutor(workers) as pool:
        images = [image for chunk in pool.map(_render_chunk, chunks) for image in chunk]
    return [image for image in images if image is not None]


def request_bodies(images: list[Any], max_tokens: int) -> list[bytes]:
    """The JSON bodies ocrflow would send: its olmOCR request, its encoder, ``ignore_eos``."""
    sys.path.insert(0, str(HERE))
    from ocrflow_bench import FixedLengthOlmocr

    from ocrflow.engines.openai import OpenAIEngine

    recipe = FixedLengthOlmocr(model=MODEL)
    encoder = SimpleNamespace(model=MODEL, logprobs=False)
    return [
        OpenAIEngine._encode(encoder, recipe.build_request(image, 0, max_tokens=max_tokens))  # type: ignore[arg-type]
        for image in images
    ]


# -- CPU of the client ----------------------------------------------------------------------
def tree_cpu_s(proc: psutil.Process) -> float:
    """User+system CPU seconds of a process and its living children."""
    total = 0.0
    for p in [proc, *proc.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            times = p.cpu_times()
            total += times.user + times.system + times.children_user + times.children_system
    return total


# -- the clients -----------------------------------------------------------------------------
async def _post_all(
    session: aiohttp.ClientSession, urls: list[str], bodies: list[bytes], concurrency: int
) -> tuple[int, int]:
    """Send every body with at most ``concurrency`` in flight, body i to ``urls[i % n]``
    (servers alike get equal shares: the ideal split); (answers ok, tokens out)."""
    gate = asyncio.Semaphore(concurrency)
    headers = {"Content-Type": "application/json"}

    async def one(i: int, body: bytes) -> int:
        url = urls[i % len(urls)]
        async with gate, session.post(url, data=body, headers=headers) as answer:
            payload = await answer.json(content_type=None)
            if answer.status != 200:
                raise RuntimeError(f"{answer.status}: {str(payload)[:300]}")
            return int(payload.get("usage", {}).get("completion_tokens", 0))

    tokens = await asyncio.gather(*(one(i, b) for i, b in enumerate(bodies)))
    return len(tokens), sum(tokens)


async def run_bare(args: argparse.Namespace) -> dict[str, Any]:
    """Client (a): pre-rendered, pre-encoded pages, N in flight, nothing else."""
    started = time.time()
    images = render_all(args.pdfs, args.pages, args.target_dim, args.render_workers)
    bodies = request_bodies(images, args.max_tokens)
    warm = request_bodies(images[: args.warmup], 8) if args.warmup else []
    prepared_s = time.time() - started
    urls = [server.rstrip("/") + "/chat/completions" for server in args.server]
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=3600)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        if warm:
            await _post_all(session, urls, warm, len(warm))
        sampler = Sampler([metrics_url(server) for server in args.server])
        await sampler.start(session)
        cpu0, t0 = tree_cpu_s(psutil.Process()), time.perf_counter()
        pages, tokens = await _post_all(session, urls, bodies, args.concurrency or len(bodies))
        wall = time.perf_counter() - t0
        cpu = tree_cpu_s(psutil.Process()) - cpu0
        await sampler.stop(session)
    mean_kib = statistics.fmean(len(b) for b in bodies) / 1024
    return {
        "client": "bare",
        "servers": len(args.server),
        "concurrency": args.concurrency or len(bodies),
        "prepare_s": round(prepared_s, 1),
        "body_kib_mean": round(mean_kib, 1),
        **_figures(pages, tokens, wall, cpu, sampler),
    }


def _figures(pages: int, tokens: int, wall: float, cpu: float, sampler: Sampler) -> dict[str, Any]:
    summary = sampler.summary()
    out = {
        "pages": pages,
        "tokens_out": tokens,
        "wall_s": round(wall, 2),
        "pages_per_s": round(pages / wall, 3),
        "client_cpu_s": round(cpu, 1),
        **summary,
    }
    if summary.get("busy_s"):
        out["busy_pages_per_s"] = round(pages / summary["busy_s"], 3)
    if summary.get("requests"):
        out["prompt_tokens_per_page"] = round(summary.get("prompt_tokens", 0) / summary["requests"])
    return out


def ocrflow_command(args: argparse.Namespace, output: str) -> list[str]:
    """The ``ocrflow run`` command line of client (b) or (c)."""
    command = [
        sys.executable, str(HERE / "ocrflow_bench.py"), "run", *args.pdfs, "-o", output,
        "--engine", args.engine, "--recipe", "olmocr", "--text-layer", "off",
        "--recipe-option", f"max_tokens={args.max_tokens}", "--json",
    ]  # fmt: skip
    if args.pages != "all":
        command += ["--pages", args.pages]
    if args.engine == "openai":
        for server in args.server:
            command += ["--server", server]
        command += ["--model", MODEL]
    else:
        command += ["--model", args.model_path, "--served-model-name", MODEL]
        command += ["--vllm-command", args.vllm_command, "--vllm-arg", args.vllm_args]
    return command + list(args.ocrflow_arg or ())


async def run_ocrflow(args: argparse.Namespace) -> dict[str, Any]:
    """Client (b) or (c): the whole CLI from PDFs on disk; its summary and our samples."""
    output = tempfile.mkdtemp(prefix="ocrflow-gpu-")
    ready_file = Path(output + ".ready")
    env = {**os.environ, "OCRFLOW_BENCH_READY": str(ready_file)}
    command = ocrflow_command(args, output)
    async with aiohttp.ClientSession() as session:
        managed = args.engine != "openai"
        sampler = Sampler([] if managed else [metrics_url(server) for server in args.server])
        await sampler.start(session)
        t0 = time.perf_counter()
        started = time.time()
        proc = await asyncio.create_subprocess_exec(
            *command, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        cpu = 0.0
        if managed:
            await _follow_managed(sampler, session, ready_file, proc)
        ps = psutil.Process(proc.pid)
        tree = TreeCpu(proc.pid)
        tree_task = asyncio.create_task(tree.run())
        spy = await _start_pyspy(args, proc.pid)
        waiter = asyncio.create_task(proc.communicate())
        while not waiter.done():
            with contextlib.suppress(psutil.Error):
                cpu = tree_cpu_s(ps) - _server_cpu(ps)
            await asyncio.wait([waiter], timeout=1.0)
        stdout, stderr = waiter.result()
        wall = time.perf_counter() - t0
        tree_task.cancel()
        await sampler.stop(session)
        if spy is not None:
            await spy.wait()
    summary = _last_json(stdout.decode())
    if proc.returncode not in (0, 1) or summary is None:
        raise RuntimeError(f"ocrflow exited {proc.returncode}: {stderr.decode()[-3000:]}")
    # Pages that went to the model (blank pages are done without it, as in the bare client).
    pages = int(summary.get("routes", {}).get("engine", 0))
    out = {
        "client": f"ocrflow-{args.engine}",
        "ocrflow_pages": summary.get("pages"),
        "ocrflow_routes": summary.get("routes"),
        "ocrflow_pages_per_s": summary.get("pages_per_s"),
        **_figures(pages, int(summary.get("tokens_out", 0)), wall, cpu, sampler),
    }
    out["client_cpu"] = tree.summary(out.get("busy_t0"), out.get("busy_t1"))
    if ready_file.exists():
        # ocrflow's engine serves once every replica answers: the last one's moment.
        replicas = [json.loads(line) for line in ready_file.read_text().splitlines()]
        ready = max(r["ready"] for r in replicas)
        out["replicas"] = len(replicas)
        out["server_start_s"] = round(ready - started, 1)
        out["after_ready_s"] = round(started + wall - ready, 2)
        out["after_ready_pages_per_s"] = round(pages / (started + wall - ready), 3)
        if "busy_t0" in out:
            # Idle server time between its answering and ocrflow's first request.
            out["lead_after_ready_s"] = round(out["busy_t0"] - ready, 2)
    return out


async def _start_pyspy(args: argparse.Namespace, pid: int) -> asyncio.subprocess.Process | None:
    """py-spy over ocrflow and its render workers (raw folded stacks), when asked for."""
    binary = shutil.which("py-spy") or "/tmp/extra/bin/py-spy"
    if not args.pyspy or not Path(binary).exists():
        return None
    command = [binary, "record", "--pid", str(pid), "--subprocesses", "--nonblocking",
               "--rate", "25", "--format", "raw", "--output", args.pyspy,
               "--duration", str(args.pyspy_s)]  # fmt: skip
    return await asyncio.create_subprocess_exec(
        *command, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
    )


async def _follow_managed(
    sampler: Sampler,
    session: aiohttp.ClientSession,
    ready_file: Path,
    proc: asyncio.subprocess.Process,
) -> None:
    """Sample each managed replica once ocrflow says it answers (in the background)."""

    async def follow() -> None:
        while proc.returncode is None:
            if ready_file.exists():
                for line in ready_file.read_text().splitlines():
                    url = metrics_url(json.loads(line)["url"])
                    await sampler.add(session, url, fresh=True)
            await asyncio.sleep(0.25)

    sampler._tasks.append(asyncio.create_task(follow()))


def _server_cpu(ps: psutil.Process) -> float:
    """CPU of a managed vLLM below ocrflow (its own session), to keep it out of ours."""
    total = 0.0
    for child in ps.children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if "vllm" in " ".join(child.cmdline()):
                times = child.cpu_times()
                total += times.user + times.system
    return total


def _last_json(text: str) -> dict[str, Any] | None:
    for line in reversed(text.splitlines()):
        with contextlib.suppress(ValueError):
            value = json.loads(line)
            if isinstance(value, dict):
                return value
    return None


# -- the table -------------------------------------------------------------------------------
COLUMNS = (
    "label", "client", "pages", "max_tokens", "pages_per_s", "busy_pages_per_s",
    "ratio", "gpu_util_mean", "running_mean", "waiting_mean", "kv_mean", "client_cpu_s",
)  # fmt: skip


def print_table(path: Path) -> None:
    """Every result as a Markdown row; ``ratio`` is pages/s over the (last) bare client's
    of the same label, token count and page count."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    bare = {
        (r["label"], r["max_tokens"], r["pages"]): r["pages_per_s"]
        for r in rows
        if r["client"] == "bare"
    }
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + "---|" * len(COLUMNS))
    for row in rows:
        ideal = bare.get((row.get("ideal") or row["label"], row["max_tokens"], row["pages"]))
        row["ratio"] = round(row["pages_per_s"] / ideal, 3) if ideal else ""
        print("| " + " | ".join(str(row.get(c, "")) for c in COLUMNS) + " |")


def build_parser() -> argparse.ArgumentParser:
    """The command line."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    for name in ("bare", "ocrflow"):
        s = sub.add_parser(name)
        s.add_argument("pdfs", nargs="+")
        s.add_argument("--label", required=True, help="the server flags' name, for the table")
        s.add_argument("--ideal", default=None, help="bare label to compare with (default: label)")
        s.add_argument("--results", type=Path, required=True)
        s.add_argument(
            "--server", action="append", help="an OpenAI base URL; repeat for several servers"
        )
        s.add_argument("--pages", default="all", help="all, or A-B in every PDF")
        s.add_argument("--max-tokens", type=int, default=1000)
        s.add_argument("--target-dim", type=int, default=1288)
    bare = sub.choices["bare"]
    bare.add_argument("--concurrency", type=int, default=0, help="0: all pages at once")
    bare.add_argument("--warmup", type=int, default=8, help="short requests before timing")
    bare.add_argument("--render-workers", type=int, default=os.cpu_count() or 1)
    flow = sub.choices["ocrflow"]
    flow.add_argument("--engine", choices=("openai", "vllm"), default="openai")
    flow.add_argument("--model-path", default="/tmp/m")
    flow.add_argument("--vllm-command", default="python3 -m vllm.entrypoints.cli.main serve")
    flow.add_argument("--vllm-args", default="", help="one string of extra vllm serve flags")
    flow.add_argument("--ocrflow-arg", action="append", help="extra ocrflow argument")
    flow.add_argument("--pyspy", default="", help="py-spy raw profile of the client to FILE")
    flow.add_argument("--pyspy-s", type=int, default=30, help="seconds of py-spy sampling")
    table = sub.add_parser("table")
    table.add_argument("results", type=Path)
    return p


def main() -> None:
    """Run one client and append its figures to ``--results``."""
    args = build_parser().parse_args()
    if args.command != "table" and not args.server:
        args.server = ["http://127.0.0.1:8000/v1"]
    if args.command == "table":
        print_table(args.results)
        return
    runner = run_bare if args.command == "bare" else run_ocrflow
    result = asyncio.run(runner(args))
    result = {"label": args.label, "ideal": args.ideal, "max_tokens": args.max_tokens, **result}
    with args.results.open("a", encoding="utf-8") as out:
        out.write(json.dumps(result) + "\n")
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
