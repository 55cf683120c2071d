"""The fake server's endpoints besides completions: what it serves and how it is doing.

``/v1/models`` and ``/version`` as vLLM answers them, ``/health``, ``/metrics`` in
Prometheus text with vLLM's metric names, ``/stats`` (the JSON counters the tests read)
and ``/admin/faults``, where tests read and change the fault rates at run time.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from aiohttp import web

from tests.fakevllm.responses import error_response
from tests.fakevllm.state import STATE, ServerState


async def models(request: web.Request) -> web.Response:
    """``GET /v1/models`` in vLLM's format."""
    cfg = request.app[STATE].config
    card = {
        "id": cfg.model,
        "object": "model",
        "created": int(time.time()),
        "owned_by": "vllm",
        "root": cfg.model,
        "parent": None,
        "max_model_len": cfg.max_model_len,
        "permission": [],
    }
    return web.json_response({"object": "list", "data": [card]})


async def health(request: web.Request) -> web.Response:
    """``GET /health``: 200 empty when ready, 503 while warming up or dead."""
    state = request.app[STATE]
    if state.engine.dead or state.warming():
        return web.Response(status=503)
    return web.Response(status=200)


def render_metrics(state: ServerState) -> str:
    """Prometheus exposition text with vLLM's metric names."""
    labels = f'engine="0",model_name="{state.config.model}"'
    engine = state.engine
    lines: list[str] = []

    def metric(name: str, kind: str, help_text: str, samples: list[tuple[str, float]]) -> None:
        lines.append(f"# HELP {name} {help_text}")
        lines.append(f"# TYPE {name} {kind}")
        for extra, value in samples:
            lines.append(f"{name}{{{labels}{extra}}} {float(value)}")

    metric(
        "vllm:num_requests_running",
        "gauge",
        "Number of requests in model execution batches.",
        [("", engine.running)],
    )
    metric(
        "vllm:num_requests_waiting",
        "gauge",
        "Number of requests waiting to be processed.",
        [("", engine.waiting)],
    )
    usage = engine.kv_cache_usage()
    metric(
        "vllm:kv_cache_usage_perc",
        "gauge",
        "KV-cache usage. 1 means 100 percent usage.",
        [("", usage)],
    )
    metric(
        "vllm:gpu_cache_usage_perc", "gauge", "GPU KV-cache usage (deprecated name).", [("", usage)]
    )
    reasons = [
        (f',finished_reason="{r}"', state.finish_reasons[r]) for r in ("stop", "length", "abort")
    ]
    metric(
        "vllm:request_success_total",
        "counter",
        "Count of successfully processed requests.",
        reasons,
    )
    metric(
        "vllm:prompt_tokens_total",
        "counter",
        "Number of prefill tokens processed.",
        [("", state.prompt_tokens_total)],
    )
    metric(
        "vllm:generation_tokens_total",
        "counter",
        "Number of generation tokens processed.",
        [("", engine.generation_tokens)],
    )
    outcomes = [(f',outcome="{k}"', v) for k, v in sorted(state.outcomes.items())]
    metric("fakevllm:requests_total", "counter", "Completion requests by outcome.", outcomes)
    return "\n".join(lines) + "\n"


async def metrics(request: web.Request) -> web.Response:
    """``GET /metrics``."""
    text = render_metrics(request.app[STATE])
    return web.Response(text=text, content_type="text/plain", charset="utf-8")


def stats_json(state: ServerState) -> dict[str, Any]:
    """The ``/stats`` document."""
    cap = state.config.capacity
    tokens_per_s = cap.full_batch_tokens_per_s()
    return {
        "received": state.received,
        "outcomes": dict(state.outcomes),
        "finish_reasons": dict(state.finish_reasons),
        "images": dict(state.images),
        "figures": dict(state.figures),
        "hanging": state.hanging,
        "prompt_tokens": state.prompt_tokens_total,
        "engine": state.engine.snapshot(),
        "capacity": {
            "max_num_seqs": cap.max_num_seqs,
            "step_base_s": cap.step_base_s,
            "step_per_seq_s": cap.step_per_seq_s,
            "full_batch_tokens_per_s": tokens_per_s,
            "full_batch_pages_per_s": tokens_per_s / state.config.tokens_per_page,
            "tokens_per_page": state.config.tokens_per_page,
        },
        "faults": dataclasses.asdict(state.faults),
        "cpu_s": time.process_time(),
        "uptime_s": time.monotonic() - state.started,
    }


async def stats(request: web.Request) -> web.Response:
    """``GET /stats``: JSON counters for tests."""
    return web.json_response(stats_json(request.app[STATE]))


async def admin_faults(request: web.Request) -> web.Response:
    """``GET``/``POST /admin/faults``: read or change fault settings."""
    state = request.app[STATE]
    if request.method == "POST":
        try:
            changes = await request.json()
            if not isinstance(changes, dict):
                raise ValueError("expected a JSON object")
            state.faults.update(changes)
        except ValueError as exc:
            return error_response(400, str(exc), "BadRequestError")
    return web.json_response(dataclasses.asdict(state.faults))


async def version(_request: web.Request) -> web.Response:
    """``GET /version``."""
    return web.json_response({"version": "0.0.0+fakevllm"})
