"""Awaiting work that a cancellation cannot stop (a thread, a blocking store write)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def run_to_end(work: Awaitable[T]) -> T:
    """Await ``work``; if the caller is cancelled meanwhile, wait for ``work`` to end first
    (a second cancellation does not cut that wait short), then let the cancellation go on.

    A thread cannot be stopped: a caller that gave up at once would let its work go on
    unseen, holding a slot it had released or landing a write after the caller's cleanup.
    ``work``'s own outcome is dropped when the caller was cancelled.
    """
    task = asyncio.ensure_future(work)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        while not task.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait({task})
        if not task.cancelled():
            task.exception()  # retrieved: the cancellation is what the caller gets
        raise
