"""Hold pages back until the engine serves, so that rendering starts while servers load.

A managed vLLM takes minutes to load a model; the first pages of a run can be rendered
meanwhile and sent the moment it answers. Each page's deadline starts only once it passes
the gate (inside the reader it wraps), so a slow start costs no page its deadline.
"""

from __future__ import annotations

import asyncio

from ocrflow.readers.plain import PageReader
from ocrflow.render.jobs import RenderedPage
from ocrflow.types import PageKey, PageResult


class ReadyGate:
    """A page reader that waits for ``ready`` (the session's) before each read.

    A failed ``ready`` never reaches a page: the pages keep waiting and the worker, which
    watches the same task, stops the run with its error (``executors.worker``).
    """

    def __init__(self, reader: PageReader, ready: asyncio.Task[None]) -> None:
        self.reader = reader
        self.image_encoding = reader.image_encoding
        self._open = asyncio.Event()
        ready.add_done_callback(self._opened)

    def _opened(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is None:
            self._open.set()

    async def read(self, page: RenderedPage, page_key: PageKey) -> PageResult:
        """Read ``page`` once the engine serves."""
        await self._open.wait()
        return await self.reader.read(page, page_key)

    async def aclose(self) -> None:
        """Close the reader under the gate."""
        await self.reader.aclose()
