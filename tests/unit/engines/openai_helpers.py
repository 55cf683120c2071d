"""Helpers for the tests that drive ``OpenAIEngine`` against a fakevllm server: page
requests, running a coroutine, closing the engine, and waiting on a free port or a
condition. Shared by test_openai.py, test_openai_connection.py and test_engine_breaker.py.
"""

from __future__ import annotations

import asyncio
import hashlib
import socket
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ocrflow.engines.openai import OpenAIEngine
from ocrflow.types import PageImage, PageRequest

MODEL = "test-model"
T = TypeVar("T")


def request(i: int, *, max_tokens: int = 100) -> PageRequest:
    """A page request with a distinct image payload."""
    data = hashlib.sha256(str(i).encode()).digest() * 64
    return PageRequest(
        image=PageImage(data, 100, 100, "png"),
        prompt="Convert this page.",
        temperature=0.1,
        max_tokens=max_tokens,
    )


def run(main: Callable[[], Awaitable[T]]) -> T:
    """Run the coroutine that ``main`` returns in a fresh event loop."""
    return asyncio.run(main())  # type: ignore[arg-type]


async def using(engine: OpenAIEngine, body: Callable[[OpenAIEngine], Awaitable[T]]) -> T:
    """Run ``body`` with ``engine`` and close it afterwards."""
    try:
        return await body(engine)
    finally:
        await engine.aclose()


async def ready_then_infer(engine: OpenAIEngine, req: PageRequest) -> Any:
    """Wait for the server to be ready, then send ``req``."""
    await engine.wait_ready(10)
    return await engine.infer(req)


def free_port() -> int:
    """A local port that nothing listens on (at the moment of asking)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
