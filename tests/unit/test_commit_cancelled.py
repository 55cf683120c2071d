"""A document's commit goes on to its end when the task committing it is cancelled (the run
stopping on another document's error), and its own error is retrieved: a full disk had
asyncio print "Task exception was never retrieved" with a traceback on the user's stderr,
now and then, where the run's one error line was due."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest

from ocrflow.cancellation import run_to_end
from ocrflow.errors import OutputError
from ocrflow.pipeline.documents import DocumentPipeline


class _Committing:
    """What ``DocumentPipeline._commit_durable`` uses of the pipeline: written documents
    waiting for their commit, and a commit that fails after a while (the disk is full)."""

    def __init__(self) -> None:
        self._pending = {"doc": object()}
        self.ended = False

    async def _commit_all(self, commits: list[Any]) -> None:
        await asyncio.sleep(0.05)
        self.ended = True
        raise OutputError("done/doc.json", "No space left on device")


def _unhandled_while(scenario: Any) -> list[dict[str, Any]]:
    """What reaches the loop's exception handler while ``scenario`` runs, objects freed."""
    unhandled: list[dict[str, Any]] = []

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _, ctx: unhandled.append(ctx))
        await scenario()
        gc.collect()  # a task nobody awaited reports its error when it is freed
        await asyncio.sleep(0)

    asyncio.run(main())
    return unhandled


def test_a_cancelled_commit_runs_to_its_end_and_its_error_is_retrieved() -> None:
    pipeline = _Committing()

    async def scenario() -> None:
        task = asyncio.ensure_future(DocumentPipeline._commit_durable(pipeline, ["doc"]))  # type: ignore[arg-type]
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # The cancellation waited for the commit: nothing is left running unseen.
        assert pipeline.ended

    assert _unhandled_while(scenario) == []


def test_run_to_end_gives_the_work_its_result_when_not_cancelled() -> None:
    async def work() -> int:
        await asyncio.sleep(0)
        return 7

    async def scenario() -> None:
        assert await run_to_end(work()) == 7
        with pytest.raises(OutputError):
            await run_to_end(_Committing()._commit_all([]))

    assert _unhandled_while(scenario) == []
