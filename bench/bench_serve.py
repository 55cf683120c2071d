"""Load on ``ocrflow serve``: many clients submit many jobs at once; every page exactly once.

50 clients (threads, one HTTP connection each) submit 200 jobs of 1-20 generated pages at
once (multipart uploads of real PDFs) to a real ``ocrflow serve`` process backed by the fake
vLLM server (``tests/fakevllm``), then poll until every job is final. Checks: every job
``done`` with ``pages.done == pages.total`` == its pages; the fake server answered exactly
one request per page (and never the same page image twice). Prints the submit latency
(p50/p95/max), the wall time, and the API process's CPU seconds per page (the ``ocrflow
serve`` process: API, database and in-process worker loops; its render processes apart).

    python bench/bench_serve.py                      # 50 clients, 200 jobs, 1-20 pages
    python bench/bench_serve.py --jobs 40 --clients 10 --max-pages 8   # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "scripts")]

from tests.fakevllm.process import ServerHandle, running_server  # noqa: E402

TOKEN = "bench-serve-token"
MODEL = "olmocr"
TERMINAL = {"done", "failed", "cancelled"}


def make_pdfs(folder: Path, jobs: int, max_pages: int, seed: int) -> list[tuple[Path, int]]:
    """One PDF a job, 1..max_pages pages, every page's text (so its image) unique."""
    import make_examples

    rng = random.Random(seed)
    made = []
    for job in range(jobs):
        count = rng.randint(1, max_pages)
        pages = [[f"Job {job} page {p + 1}", f"Serial {rng.getrandbits(48):012x}"]
                 for p in range(count)]  # fmt: skip
        path = folder / f"job{job:03d}.pdf"
        path.write_bytes(make_examples.text_pdf(pages))
        made.append((path, count))
    return made


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_serve(root: Path, server: ServerHandle, workers: int) -> tuple[subprocess.Popen, str]:
    """``ocrflow serve`` on a free port with one token, engine = the fake server."""
    port = free_port()
    args = [
        sys.executable, "-m", "ocrflow.cli", "serve",
        "--host", "127.0.0.1", "--port", str(port), "--root", str(root),
        "--workers", str(workers),
        "--engine", "openai", "--server", server.base_url, "--model", MODEL,
    ]  # fmt: skip
    env = {**os.environ, "OCRFLOW_API_TOKENS": TOKEN}
    root.mkdir(parents=True, exist_ok=True)
    log = (root / "serve.log").open("w")
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"ocrflow serve exited: {(root / 'serve.log').read_text()[-2000:]}")
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return proc, url
        except httpx.TransportError:
            time.sleep(0.2)
    raise SystemExit("ocrflow serve did not answer /health in 60 s")


def cpu_seconds(pid: int) -> float:
    """User+system CPU seconds of one process (not its children), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def submit_all(url: str, pdfs: list[tuple[Path, int]], clients: int) -> list[dict[str, Any]]:
    """Submit every PDF as one job from ``clients`` threads released at once."""
    start = threading.Barrier(clients)
    local = threading.local()

    def client() -> httpx.Client:
        if not hasattr(local, "client"):
            local.client = httpx.Client(
                base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=120
            )
            start.wait()  # every client connects, then all submit together
        return local.client

    def submit(item: tuple[Path, int]) -> dict[str, Any]:
        path, pages = item
        http = client()
        options = json.dumps({"text_layer": "off", "recipe": "olmocr"})
        began = time.perf_counter()
        answer = http.post(
            "/v1/jobs",
            files={"files": (path.name, path.read_bytes(), "application/pdf")},
            data={"options": options},
        )
        latency = time.perf_counter() - began
        if answer.status_code != 201:
            raise SystemExit(f"POST /v1/jobs: {answer.status_code} {answer.text[:300]}")
        return {"id": answer.json()["id"], "pages": pages, "latency_s": latency}

    with ThreadPoolExecutor(clients) as pool:
        return list(pool.map(submit, pdfs))


def wait_all(url: str, jobs: list[dict[str, Any]], timeout_s: float) -> dict[str, dict]:
    """Poll every job until all are final; their last answers by id."""
    final: dict[str, dict] = {}
    headers = {"Authorization": f"Bearer {TOKEN}"}
    deadline = time.monotonic() + timeout_s
    with httpx.Client(base_url=url, headers=headers, timeout=30) as http:
        while len(final) < len(jobs):
            if time.monotonic() > deadline:
                raise SystemExit(f"only {len(final)} of {len(jobs)} jobs final in {timeout_s} s")
            for job in jobs:
                if job["id"] not in final:
                    body = http.get(f"/v1/jobs/{job['id']}").json()
                    if body["status"] in TERMINAL:
                        final[job["id"]] = body
            time.sleep(1.0)
    return final


def check(jobs: list[dict[str, Any]], final: dict[str, dict], server: ServerHandle) -> int:
    """Every job done with all its pages; every page answered once. Returns total pages."""
    total = sum(j["pages"] for j in jobs)
    statuses = Counter(f["status"] for f in final.values())
    bad = [
        (j["id"], final[j["id"]]["status"], final[j["id"]]["pages"], j["pages"])
        for j in jobs
        if final[j["id"]]["status"] != "done"
        or final[j["id"]]["pages"] != {"done": j["pages"], "total": j["pages"]}
    ]
    stats = server.stats()
    answered = sum(stats["outcomes"].values())
    repeats = {tag: n for tag, n in stats["images"].items() if n != 1}
    print(f"jobs by status: {dict(statuses)}")
    images = len(stats["images"])
    print(f"pages: {total} submitted, fake server answered {answered} requests, "
          f"{images} distinct page images, {len(repeats)} sent twice or more")  # fmt: skip
    problems = []
    if bad:
        problems.append(f"{len(bad)} jobs not done with all pages, e.g. {bad[:3]}")
    if answered != total or images != total or repeats:
        problems.append("pages not answered exactly once")
    if problems:
        raise SystemExit("FAILED: " + "; ".join(problems))
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--max-pages", type=int, default=20)
    parser.add_argument("--workers", type=int, default=4, help="ocrflow serve --workers")
    parser.add_argument("--pages-per-s", default="400", help="fake server capacity")
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--seed", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-serve-") as tmp:
        folder = Path(tmp)
        (folder / "pdfs").mkdir()
        pdfs = make_pdfs(folder / "pdfs", args.jobs, args.max_pages, args.seed)
        flags = ("--model", MODEL, "--reply-format", "olmocr", "--tokens-per-page", "50",
                 "--pages-per-s", args.pages_per_s, "--max-num-seqs", "256")  # fmt: skip
        with running_server(*flags) as server:
            proc, url = start_serve(folder / "root", server, args.workers)
            try:
                cpu_before = cpu_seconds(proc.pid)
                began = time.perf_counter()
                jobs = submit_all(url, pdfs, args.clients)
                submitted = time.perf_counter() - began
                final = wait_all(url, jobs, args.timeout)
                wall = time.perf_counter() - began
                cpu = cpu_seconds(proc.pid) - cpu_before
                total = check(jobs, final, server)
            finally:
                proc.terminate()
                proc.wait(30)
    latencies = sorted(j["latency_s"] for j in jobs)
    p95 = latencies[min(len(latencies) - 1, round(0.95 * (len(latencies) - 1)))]
    print(f"{len(jobs)} jobs from {args.clients} clients, {total} pages, "
          f"serve --workers {args.workers}")  # fmt: skip
    print(f"submit latency: p50 {statistics.median(latencies) * 1000:.0f} ms, "
          f"p95 {p95 * 1000:.0f} ms, max {latencies[-1] * 1000:.0f} ms "
          f"(all {len(jobs)} submitted in {submitted:.1f} s)")  # fmt: skip
    print(f"all done in {wall:.1f} s: {total / wall:.1f} pages/s")
    print(f"API process CPU: {cpu:.1f} s, {cpu / total * 1000:.1f} ms per page")


if __name__ == "__main__":
    main()
