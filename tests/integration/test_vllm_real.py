"""Managed vLLM against the real ``vllm serve`` (CPU build) and a tiny random LLaVA model.

One server start serves the whole module (a start takes 45-100 s on two cores); the tests
run in file order: ready, flags accepted, /metrics, a chat completion, crash and restart,
clean stop. ``scripts/system-deps.sh`` installs them under ``OCRFLOW_CACHE`` (see
``tests/needs.py``).
"""

from __future__ import annotations

import asyncio
import base64
import io
import logging
import os
import signal
import threading
import time
from collections.abc import Coroutine, Iterator
from typing import Any

import httpx
import psutil
import pytest
from PIL import Image

from ocrflow.engines.presets import preset_flags
from ocrflow.engines.server import ManagedServers, ServerSpec
from ocrflow.recipes import deepseek, olmocr
from tests.needs import TINY_VLM, VLLM_VENV, need_vllm

pytestmark = [pytest.mark.vllm, pytest.mark.slow, pytest.mark.timeout(600)]

VENV = VLLM_VENV
MODEL = TINY_VLM
#: What the recipes and ``--preset fp8`` on CPU (its KV cache flag) ask of a real server
#: (last value wins), checked against vLLM here.
FLAGS = (
    *olmocr.SERVER_FLAGS,
    *deepseek.SERVER_FLAGS,
    *preset_flags("fp8", model=str(TINY_VLM), gpus=()),
    "--dtype",
    "float32",
)
CPU_ENV = {"VLLM_TARGET_DEVICE": "cpu", "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"}
log = logging.getLogger(__name__)


@pytest.fixture(scope="module")
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """An event loop on a thread of its own, so the watcher runs between tests."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()


def call(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any], timeout: float) -> Any:
    """Run ``coro`` on the module's loop and return its result."""
    return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout)


@pytest.fixture(scope="module")
def servers(
    loop: asyncio.AbstractEventLoop, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ManagedServers]:
    """One real vLLM replica, started once for the module and stopped at its end."""
    need_vllm()
    spec = ServerSpec(
        model=str(MODEL),
        served_model_name="olmocr",
        flags=FLAGS,
        command=(str(VENV / "bin" / "vllm"), "serve"),
        env=CPU_ENV,
        log_dir=str(tmp_path_factory.mktemp("logs")),
        ready_timeout_s=400,
        max_restarts=1,
    )
    managed = ManagedServers(spec, poll_interval_s=0.5, restart_delay_s=0.0)
    started = time.monotonic()
    call(loop, managed.start(), 450)
    log.info("vLLM ready in %.1f s", time.monotonic() - started)
    yield managed
    call(loop, managed.stop(), 120)


def tiny_png() -> str:
    """A small page-like PNG as a data URL."""
    image = Image.new("RGB", (96, 64), "white")
    image.paste((0, 0, 0), (10, 20, 80, 28))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def chat(url: str) -> httpx.Response:
    """One chat completion with an image, as an OCR recipe would send it."""
    content = [
        {"type": "image_url", "image_url": {"url": tiny_png()}},
        {"type": "text", "text": "Convert the document to markdown."},
    ]
    body = {
        "model": "olmocr",
        "messages": [{"role": "user", "content": content}],
        "max_tokens": 16,
        "temperature": 0.1,
    }
    return httpx.post(url + "/chat/completions", json=body, timeout=120)


def descendants(pid: int) -> list[int]:
    """``pid`` and its children (API server, EngineCore, workers, resource tracker)."""
    proc = psutil.Process(pid)
    return [pid, *(child.pid for child in proc.children(recursive=True))]


def running(pid: int) -> bool:
    """True while ``pid`` is a live process (a zombie is not)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_server_is_ready_and_lists_the_served_name(servers: ManagedServers) -> None:
    [url] = servers.ready_urls
    assert url.startswith("http://127.0.0.1:")
    models = httpx.get(url + "/models", timeout=10).json()
    assert [m["id"] for m in models["data"]] == ["olmocr"]
    assert models["data"][0]["max_model_len"] == 8192  # the last --max-model-len won


def test_recipe_flags_were_accepted(servers: ManagedServers) -> None:
    text = servers.log_paths[0].read_text(errors="replace")
    assert "non-default args" in text and "unrecognized arguments" not in text
    for accepted in ("'limit_mm_per_prompt': {'video': 0}", "'enable_prefix_caching': False",
                     "'mm_processor_cache_gb': 0", "NGramPerReqLogitsProcessor",
                     "'kv_cache_dtype': 'fp8'"):  # fmt: skip
        assert accepted in text


def test_metrics_expose_the_queue_gauges(servers: ManagedServers) -> None:
    metrics = httpx.get(servers.urls[0].removesuffix("/v1") + "/metrics", timeout=10).text
    assert "vllm:num_requests_running" in metrics
    assert "vllm:num_requests_waiting" in metrics


def test_a_chat_completion_with_an_image_answers(servers: ManagedServers) -> None:
    reply = chat(servers.urls[0])
    assert reply.status_code == 200, reply.text
    assert reply.json()["choices"][0]["finish_reason"] in ("stop", "length")


def test_a_killed_server_is_restarted(servers: ManagedServers) -> None:
    replica = servers.replicas[0]
    old = descendants(replica.pid or 0)
    assert len(old) >= 2  # the API server and at least its EngineCore
    os.kill(old[0], signal.SIGKILL)
    deadline = time.monotonic() + 450
    while not (servers.restarts[0] == 1 and replica.state == "ready"):
        assert replica.state != "down", servers.log_paths[0].read_text()[-3000:]
        assert time.monotonic() < deadline, "no restart in time"
        time.sleep(1)
    assert not any(running(pid) for pid in old)  # orphaned EngineCore reaped too
    assert chat(replica.url).status_code == 200


def test_stop_leaves_no_process_behind(
    servers: ManagedServers, loop: asyncio.AbstractEventLoop
) -> None:
    pids = descendants(servers.replicas[0].pid or 0)
    call(loop, servers.stop(), 120)
    assert not any(running(pid) for pid in pids)
    ours = f"{MODEL} --host 127.0.0.1 --port {servers.replicas[0].port} "  # not other agents'
    leftovers = [
        p.pid
        for p in psutil.process_iter(["cmdline", "status"])
        if ours in " ".join(p.info["cmdline"] or []) and p.info["status"] != "zombie"
    ]
    assert leftovers == []
    assert {r.state for r in servers.replicas} == {"stopped"}
