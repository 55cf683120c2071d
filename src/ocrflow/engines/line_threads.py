"""Threads that read one page's lines side by side, so that a lone page uses every core
the engine was given.

The embedded engine reads ``parallel`` pages at once, one thread each: at full load every
core is busy. A lone page (a one-page document, the last page of a run) left the other
cores idle while its recogniser read line after line, 85-90 % of its time. Its lines are
shared out here instead, among as many threads as the engine reads pages at once: the
work of several pages in flight queues on the same threads, so the engine never runs more
model calls at once than it has cores for, and a lone page is read up to that many times
faster (measured in docs/embedded-engine.md).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

#: Fewer lines than this are read in the page's own thread: handing them over would cost
#: more than it saves.
MIN_SHARED_LINES = 8


class LineThreads:
    """A pool of ``count`` threads, started on first use (and again in a forked child)."""

    def __init__(self, count: int) -> None:
        self.count = max(1, count)
        self._pool: ThreadPoolExecutor | None = None
        self._pid = 0
        self._lock = threading.Lock()

    def map(self, work: Callable[[T], R], parts: Sequence[T]) -> list[R]:
        """``work`` of each part, in the threads when there are several parts."""
        if self.count < 2 or len(parts) < 2:
            return [work(part) for part in parts]
        return list(self._started().map(work, parts))

    def shares(self, lines: int) -> int:
        """Into how many parts ``lines`` lines are cut."""
        return self.count if lines >= MIN_SHARED_LINES else 1

    def close(self) -> None:
        """Stop the threads once their work is done; a later ``map`` starts new ones."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None and self._pid == os.getpid():
            pool.shutdown(wait=True)

    def _started(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None or self._pid != os.getpid():
                # A forked child has none of its parent's threads: it starts its own.
                self._pool = ThreadPoolExecutor(self.count, thread_name_prefix="ocrflow-lines")
                self._pid = os.getpid()
            return self._pool
