"""Two replicas on the CPU test server: how ``OpenAIEngine`` spreads one batch over them.

    .venv/bin/python bench/bench_replicas.py [--pages 600]

Every page of the batch is asked for at once (the GPU bench's case: a batch both servers
can hold), against tests/fakevllm servers of the same capacity. Printed, one JSON line each:

- ``one``: one server, the baseline;
- ``two``: two servers, each its own URL (``--server`` twice, or ``--gpus 0,1``): wall time,
  pages/s as a ratio of ``one``, and each server's share of the pages;
- ``slow+fast``: two servers, one four times faster: the fast one's share (ideal 0.8);
- ``balancer``: two servers sharing one port (SO_REUSEPORT, as vLLM binds; the kernel
  spreads connections like a load balancer) behind one URL: pages/s against ``two``.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import socket
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from ocrflow.engines.openai import OpenAIEngine  # noqa: E402
from ocrflow.errors import EngineUnavailable  # noqa: E402
from ocrflow.types import PageImage, PageRequest  # noqa: E402
from tests.fakevllm.process import running_server  # noqa: E402

MODEL = "bench-model"


def _request(i: int) -> PageRequest:
    data = hashlib.sha256(str(i).encode()).digest() * 64
    return PageRequest(PageImage(data, 100, 100, "png"), "Convert this page.", 0.1, 100)


async def _one(engine: OpenAIEngine, i: int) -> None:
    while True:
        try:
            await engine.infer(_request(i))
            return
        except EngineUnavailable:
            await asyncio.sleep(0.02)


async def _batch(urls: list[str], pages: int) -> float:
    engine = OpenAIEngine(urls, MODEL)
    try:
        await engine.wait_ready(20)
        started = time.monotonic()
        await asyncio.gather(*(_one(engine, i) for i in range(pages)))
        return time.monotonic() - started
    finally:
        await engine.aclose()


def _flags(pages_per_s: float) -> list[str]:
    return ["--model", MODEL, "--max-num-seqs", "48", "--pages-per-s", str(pages_per_s),
            "--tokens-per-page", "50"]  # fmt: skip


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> None:
    """Run the four cases and print them."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=600)
    n = parser.parse_args().pages
    with running_server(*_flags(40)) as one:
        base = asyncio.run(_batch([one.base_url], n))
    print(json.dumps({"case": "one", "wall_s": round(base, 2), "pages_per_s": round(n / base, 1)}))
    with running_server(*_flags(40)) as a, running_server(*_flags(40)) as b:
        two = asyncio.run(_batch([a.base_url, b.base_url], n))
        got = [a.stats()["received"], b.stats()["received"]]
    share = got[0] / sum(got)
    print(json.dumps({"case": "two", "wall_s": round(two, 2), "of_one": round(base / two, 3),
                      "first_share": round(share, 3)}))  # fmt: skip
    with running_server(*_flags(80)) as fast, running_server(*_flags(20)) as slow:
        asyncio.run(_batch([fast.base_url, slow.base_url], n))
        got = [fast.stats()["received"], slow.stats()["received"]]
    print(json.dumps({"case": "slow+fast", "fast_share": round(got[0] / sum(got), 3)}))
    port = _free_port()
    shared = ("--port", str(port), "--reuse-port")
    with running_server(*_flags(40), *shared) as a, running_server(*_flags(40), *shared):
        lb = asyncio.run(_batch([a.base_url], n))
    print(json.dumps({"case": "balancer", "wall_s": round(lb, 2), "of_two": round(two / lb, 3)}))


if __name__ == "__main__":
    main()
