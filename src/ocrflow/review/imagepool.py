"""Render documents' page images in worker processes, a bounded number at a time, in order.

PDFium is not thread-safe and a hostile file can hang or crash it: each document's pages are
one job in a pebble process pool with a timeout, so a bad file costs its own images only.
At most ``2 × workers`` documents are in flight, so memory does not grow with the run.
"""

from __future__ import annotations

import multiprocessing
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Generic, TypeVar

from pebble import ProcessExpired, ProcessPool

from ocrflow.review.images import PageImageFile, PageImageJob, write_page_images

T = TypeVar("T")
_OPEN_ALLOWANCE_S = 30.0


class ImagePool(Generic[T]):
    """``map`` items to their page images; items without a job get no images."""

    def __init__(self, workers: int, *, page_timeout_s: float = 60.0) -> None:
        self.workers = max(1, workers)
        self.page_timeout_s = page_timeout_s
        self._pool = ProcessPool(
            max_workers=self.workers,
            max_tasks=200,  # recycle workers now and then: PDFium keeps caches
            context=multiprocessing.get_context("forkserver"),
        )

    def __enter__(self) -> ImagePool[T]:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def map(
        self, items: Iterable[T], job_for: Callable[[T], PageImageJob | None]
    ) -> Iterator[tuple[T, list[PageImageFile]]]:
        """Each item with its page images (or their errors), in the order of ``items``."""
        window: deque[tuple[T, PageImageJob | None, Future[list[PageImageFile]] | None]] = deque()
        for item in items:
            job = job_for(item)
            window.append((item, job, self._schedule(job)))
            if len(window) >= 2 * self.workers:
                yield self._finish(*window.popleft())
        while window:
            yield self._finish(*window.popleft())

    def _schedule(self, job: PageImageJob | None) -> Future[list[PageImageFile]] | None:
        if job is None or not job.pages:
            return None
        timeout = _OPEN_ALLOWANCE_S + self.page_timeout_s * len(job.pages)
        return self._pool.schedule(write_page_images, args=(job,), timeout=timeout)

    def _finish(
        self, item: T, job: PageImageJob | None, future: Future[list[PageImageFile]] | None
    ) -> tuple[T, list[PageImageFile]]:
        if job is None or future is None:
            return item, []
        try:
            return item, future.result()
        except FutureTimeout:
            error = "rendering the page images timed out"
        except ProcessExpired as exc:
            error = f"the render worker died (exit code {exc.exitcode})"
        return item, [PageImageFile(page, error=error) for page in job.pages]

    def close(self) -> None:
        """Stop the workers."""
        self._pool.stop()
        self._pool.join(timeout=10)
