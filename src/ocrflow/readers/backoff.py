"""One request to a VLM engine, sent again after transient failures until a deadline.

The page reader (``readers.vlm``) and the figure asker (``stages.asker``) both ask this way:
a transient failure (unreachable, 429/5xx, a timeout) backs off with full jitter and does not
use one of the caller's attempts; the caller's deadline bounds the whole.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Protocol

from ocrflow.engines.base import Engine
from ocrflow.errors import EngineUnavailable
from ocrflow.readers.policy import TransportPolicy
from ocrflow.types import EngineReply, PageRequest


class DeadlinePassed(Exception):
    """The deadline passed before an answer came."""


class TransientCount(Protocol):
    """What a caller keeps across its requests: backoff grows with every transient failure
    of the same page or figure, not only of this request."""

    transient: int
    last_error: str


async def infer_with_backoff(
    engine: Engine,
    request: PageRequest,
    deadline: float,
    state: TransientCount,
    *,
    transport: TransportPolicy,
    rng: random.Random,
    request_timeout_s: float | None = None,
) -> EngineReply:
    """``engine``'s answer to ``request``, retrying transient failures with backoff until
    ``deadline`` (a ``time.monotonic()`` value; past it: ``DeadlinePassed``).

    Each try may take ``request_timeout_s`` (default: the transport's), or the rest of the
    deadline for an engine that times its own requests. ``EngineRejected`` and every other
    error go up at once.
    """
    timeout_s = transport.request_timeout_s if request_timeout_s is None else request_timeout_s
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise DeadlinePassed()
        try:
            async with asyncio.timeout(request_budget(engine, left, timeout_s)):
                return await engine.infer(request)
        except (EngineUnavailable, TimeoutError) as exc:
            state.transient += 1
            state.last_error = str(exc) or "request timed out"
            pause = transport.backoff_s(state.transient, rng)
            await asyncio.sleep(min(pause, max(0.0, deadline - time.monotonic())))


def request_budget(engine: Engine, left: float, request_timeout_s: float) -> float:
    """How long one ``infer`` call may take.

    An engine that times its own requests (it alone knows when one leaves its queue of pages
    waiting for a slot) gets the rest of the deadline: timing the wait for a slot as if it
    were the request would abandon requests that were merely queued.
    """
    if getattr(engine, "request_timeout_s", None) is not None:
        return left
    return min(left, request_timeout_s)
