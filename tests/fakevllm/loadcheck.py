"""Measure fakevllm's own CPU cost per request under load.

Runs a closed-loop httpx client (``--concurrency`` requests in flight) against a fresh
server (or ``--url``) and prints one JSON line: wall time, achieved pages/s against the
server's full-batch capacity, and the server's and this client's CPU seconds per request::

    python -m tests.fakevllm.loadcheck --requests 600 --pages-per-s 40 --concurrency 128

Request bodies are built once up front (distinct image payloads of ``--image-kb`` KiB of
base64 each) so that the client spends as little CPU as possible on the shared cores.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import time
from contextlib import ExitStack
from typing import Any

import httpx

from tests.fakevllm.process import running_server


def build_bodies(n: int, image_kb: int) -> list[bytes]:
    """``n`` chat-completion bodies with distinct base64 image payloads."""
    blob = base64.b64encode(os.urandom(image_kb * 768)).decode()
    bodies = []
    for i in range(n):
        url = f"data:image/png;base64,{i:08d}{blob}"
        message = {
            "role": "user",
            "content": [
                {"type": "text", "text": "Convert this page to Markdown."},
                {"type": "image_url", "image_url": {"url": url}},
            ],
        }
        body = {"model": "test-model", "messages": [message], "temperature": 0.1}
        bodies.append(json.dumps(body).encode())
    return bodies


async def drive(base_url: str, bodies: list[bytes], concurrency: int) -> dict[str, int]:
    """Send every body with at most ``concurrency`` in flight; count status codes."""
    codes: dict[str, int] = {}
    queue: asyncio.Queue[bytes] = asyncio.Queue()
    for body in bodies:
        queue.put_nowait(body)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    headers = {"Content-Type": "application/json"}
    async with httpx.AsyncClient(base_url=base_url, limits=limits, timeout=120) as client:

        async def worker() -> None:
            while not queue.empty():
                body = queue.get_nowait()
                try:
                    response = await client.post("/chat/completions", content=body, headers=headers)
                    key = str(response.status_code)
                except httpx.HTTPError as exc:
                    key = type(exc).__name__
                codes[key] = codes.get(key, 0) + 1

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return codes


async def drive_aiohttp(base_url: str, bodies: list[bytes], concurrency: int) -> dict[str, int]:
    """Like :func:`drive` with an aiohttp client (to compare client CPU costs)."""
    import aiohttp

    codes: dict[str, int] = {}
    pending = list(reversed(bodies))
    headers = {"Content-Type": "application/json"}
    connector = aiohttp.TCPConnector(limit=concurrency)
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:

        async def worker() -> None:
            while pending:
                body = pending.pop()
                url = base_url + "/chat/completions"
                try:
                    async with session.post(url, data=body, headers=headers) as response:
                        await response.read()
                        key = str(response.status)
                except aiohttp.ClientError as exc:
                    key = type(exc).__name__
                codes[key] = codes.get(key, 0) + 1

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return codes


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Start (or reuse) a server, drive the load, and return the measurements."""
    bodies = build_bodies(args.requests, args.image_kb)
    with ExitStack() as stack:
        url = args.url
        if url is None:
            flags = [
                "--pages-per-s", args.pages_per_s, "--max-num-seqs", args.max_num_seqs,
                "--tokens-per-page", args.tokens_per_page, "--tokens-jitter", args.tokens_jitter,
                "--base-fraction", args.base_fraction,
            ]  # fmt: skip
            url = stack.enter_context(running_server(*flags)).url
        stats0 = httpx.get(url + "/stats", timeout=10).json()
        cpu0, client0, t0 = stats0["cpu_s"], time.process_time(), time.perf_counter()
        driver = drive_aiohttp if args.client == "aiohttp" else drive
        codes = asyncio.run(driver(url + "/v1", bodies, args.concurrency))
        wall = time.perf_counter() - t0
        client_cpu = time.process_time() - client0
        stats1 = httpx.get(url + "/stats", timeout=10).json()
    capacity = stats1["capacity"]["full_batch_pages_per_s"]
    n = args.requests
    return {
        "client": args.client,
        "requests": n,
        "concurrency": args.concurrency,
        "image_kb": args.image_kb,
        "status": codes,
        "wall_s": round(wall, 3),
        "pages_per_s": round(n / wall, 2),
        "capacity_pages_per_s": round(capacity, 2),
        "ratio": round(n / wall / capacity, 3),
        "engine_steps": stats1["engine"]["steps"] - stats0["engine"]["steps"],
        "mean_batch": stats1["engine"]["mean_batch"],
        "server_cpu_ms_per_request": round((stats1["cpu_s"] - cpu0) * 1000 / n, 3),
        "server_cpu_share_of_one_core": round((stats1["cpu_s"] - cpu0) / wall, 4),
        "client_cpu_ms_per_request": round(client_cpu * 1000 / n, 3),
    }


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    p = argparse.ArgumentParser(prog="python -m tests.fakevllm.loadcheck", description=__doc__)
    p.add_argument("--url", default=None, help="use this running server instead of a new one")
    p.add_argument("--requests", type=int, default=600)
    p.add_argument("--concurrency", type=int, default=128)
    p.add_argument("--pages-per-s", type=float, default=40.0)
    p.add_argument("--max-num-seqs", type=int, default=128)
    p.add_argument("--tokens-per-page", type=int, default=100)
    p.add_argument("--tokens-jitter", type=float, default=0.0)
    p.add_argument("--base-fraction", type=float, default=0.5)
    p.add_argument("--client", choices=("httpx", "aiohttp"), default="httpx")
    p.add_argument("--image-kb", type=int, default=200, help="base64 KiB per image")
    print(json.dumps(run(p.parse_args(argv))), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
