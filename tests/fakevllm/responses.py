"""The bodies the fake server sends: OpenAI/vLLM errors, completions, stream events.

Also ``close_and_wait``, the way every fault that ends a connection without a proper
answer (``drop``, ``hang``, ``truncate``) leaves.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

from aiohttp import web

from tests.fakevllm.state import ServerConfig

ENGINE_DEAD_MESSAGE = (
    "EngineCore died (EngineDeadError): EngineCore encountered an issue. "
    "See stack trace (above) for the root cause."
)


def error_response(
    status: int, message: str, err_type: str, param: str | None = None, **headers: str
) -> web.Response:
    """An OpenAI/vLLM error body: ``{"error": {message, type, param, code}}``."""
    body = {"error": {"message": message, "type": err_type, "param": param, "code": status}}
    return web.json_response(body, status=status, headers=headers or None)


def completion_body(
    cfg: ServerConfig,
    content: str,
    finish: str,
    usage: dict[str, int],
    logprobs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A non-streaming ``chat.completion`` object as vLLM returns it."""
    return {
        "id": "chatcmpl-" + uuid.uuid4().hex,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": cfg.model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "tool_calls": []},
                "logprobs": logprobs,
                "finish_reason": finish,
                "stop_reason": None,
            }
        ],
        "usage": usage,
        "prompt_logprobs": None,
    }


def sse_event(obj: Any) -> bytes:
    """One server-sent event line."""
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def completion_chunk(
    cid: str, cfg: ServerConfig, delta: dict[str, Any], finish: str | None
) -> bytes:
    """A ``chat.completion.chunk`` event."""
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    obj = {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": cfg.model,
        "choices": [choice],
    }
    return sse_event(obj)


async def close_and_wait(request: web.Request) -> web.StreamResponse:
    """Close the connection; the handler is then cancelled by aiohttp (safety cap 5 s)."""
    if request.transport is not None:
        request.transport.close()
    await asyncio.sleep(5)
    raise web.HTTPServiceUnavailable()
