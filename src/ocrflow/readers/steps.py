"""The further requests of multi-step recipes (MinerU2.5: layout, then one crop per block).

The reader sends a page's first request as any other; ``run_steps`` then sends the steps
the recipe asks for through the reader's own ``ask`` (the engine's limiter, the transient
retries and the page deadline), each with the recipe's attempt ladder. A step that still
fails is an answer without text and a reason: its block is marked, the page stays ok.
``EngineFailing`` (every server down too long) is not a step failure: it stops the run.

Checkpoints extend the page checkpoints (``Workspace.save_steps``, beside them in the
document's checkpoint folder): the first read's reply once it parsed, then each step's
answer as it comes. Saves are coalesced (one write in flight, the latest state next), so
a page of 40 blocks costs a few writes, not 40. A run killed between steps finds them
there: the first request is not sent again and answered steps are not asked again.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from ocrflow.errors import EngineFailing, EngineRejected, EngineUnavailable, ParseError
from ocrflow.recipes.base import ParsedPage, StepAnswer, StepRecipe, StepRequest
from ocrflow.types import EngineReply, ImageSize, PageImage, PageKey, PageRequest
from ocrflow.workspace.state import store_call, store_write

Ask = Callable[[PageRequest], Awaitable[EngineReply]]


class StepStore(Protocol):
    """Where step checkpoints live (``Workspace`` is one)."""

    def save_steps(self, doc_id: str, page: int, record: dict[str, Any]) -> None: ...

    def load_steps(self, doc_id: str, page: int) -> dict[str, Any] | None: ...


class PageSteps:
    """The step checkpoint of one page: read once when the page starts, saved as its
    steps finish. Without a store it only holds the answers of this run."""

    def __init__(self, store: StepStore | None, key: PageKey, record: dict[str, Any] | None):
        self.store, self.key = store, key
        record = record or {}
        self.first: dict[str, Any] | None = record.get("first")
        self.answers: dict[str, StepAnswer] = {
            k: StepAnswer(k, v.get("text"), v.get("reason", ""), int(v.get("attempts", 1)))
            for k, v in (record.get("answers") or {}).items()
        }
        self._saving: asyncio.Task[None] | None = None
        self._dirty = False

    @classmethod
    async def open(cls, store: StepStore | None, key: PageKey) -> PageSteps:
        """The page's checkpoint as a former run left it (empty without one)."""
        if store is None:
            return cls(None, key, None)
        record = await store_call(store.load_steps, key.doc_id, key.page)
        return cls(store, key, record)

    def first_reply(self) -> EngineReply | None:
        """The checkpointed first reply (its tokens were counted by the run that got it)."""
        if self.first is None:
            return None
        size = self.first.get("image_size")
        return EngineReply(
            str(self.first["text"]),
            str(self.first.get("finish_reason", "stop")),
            image_size=ImageSize(int(size[0]), int(size[1])) if size else None,
            attributes={"resumed": True},
        )

    async def save_first(self, reply: EngineReply) -> None:
        """Record the first reply (once it parsed) and write it before any step is sent."""
        size = [reply.image_size.width, reply.image_size.height] if reply.image_size else None
        self.first = {"text": reply.text, "finish_reason": reply.finish_reason, "image_size": size}
        self.answers.clear()  # a new first read: answers of an older one do not apply
        await self.flush()

    def record_answer(self, answer: StepAnswer) -> None:
        """Record one step's answer; it is written by the coalesced saver."""
        self.answers[answer.key] = answer
        self._schedule()

    async def flush(self) -> None:
        """Write the checkpoint now (after any write in flight)."""
        if self.store is None:
            return
        if self._saving is not None:
            await self._saving
        await store_write(self.store.save_steps, self.key.doc_id, self.key.page, self._record())

    async def drain(self) -> None:
        """Wait for the coalesced saver to write the latest state."""
        while self._saving is not None:
            await self._saving

    def _schedule(self) -> None:
        if self.store is None:
            return
        self._dirty = True
        if self._saving is None:
            self._saving = asyncio.get_running_loop().create_task(self._save_loop())

    async def _save_loop(self) -> None:
        try:
            while self._dirty:
                self._dirty = False
                assert self.store is not None
                await store_write(
                    self.store.save_steps, self.key.doc_id, self.key.page, self._record()
                )
        finally:
            self._saving = None

    def _record(self) -> dict[str, Any]:
        answers = {
            k: {"text": a.text, "reason": a.reason, "attempts": a.attempts}
            for k, a in self.answers.items()
        }
        return {"first": self.first, "answers": answers}


async def run_steps(
    recipe: StepRecipe, page: PageImage, parsed: ParsedPage, steps: PageSteps, ask: Ask
) -> ParsedPage:
    """``parsed`` completed by its further requests; answered steps are not asked again."""
    wanted = await asyncio.to_thread(recipe.step_requests, page, parsed)
    todo = [step for step in wanted if step.key not in steps.answers]
    resumed = len(wanted) - len(todo)
    try:
        answers = await asyncio.gather(*(_one_step(recipe, step, ask, steps) for step in todo))
    finally:
        # Cancelled too (a worker that lost its lease): the saves in flight land before the
        # cancellation goes on, so the worker's cleanup of late checkpoints sees them.
        await steps.drain()
    by_key = {a.key: a for a in answers} | {
        k: a for k, a in steps.answers.items() if k not in {x.key for x in answers}
    }
    combined = recipe.combine(parsed, by_key)
    record = {
        "requests": len(wanted),
        "resumed": resumed,
        "failed": sum(1 for a in by_key.values() if a.text is None),
    }
    return dataclasses.replace(combined, attributes={**combined.attributes, "steps": record})


async def _one_step(
    recipe: StepRecipe, step: StepRequest, ask: Ask, steps: PageSteps
) -> StepAnswer:
    """One step through its attempts; its answer is recorded either way."""
    reason, attempt = "", 0
    while attempt < recipe.step_attempts:
        try:
            reply = await ask(recipe.build_step_request(step, attempt))
            if not reply.text.strip():
                raise ParseError("the reply has no text", reason="empty_reply")
            text = recipe.parse_step(step, reply)
        except EngineFailing:
            raise
        except ParseError as exc:
            reason = f"{exc.reason or 'parse_error'}: {exc}"
            attempt += 1
            continue
        except (EngineRejected, EngineUnavailable) as exc:
            reason, attempt = f"engine_error: {exc}", attempt + 1
            break  # refused, or the page deadline passed: more attempts would not help
        answer = StepAnswer(step.key, text, "", attempt + 1)
        steps.record_answer(answer)
        return answer
    answer = StepAnswer(step.key, None, reason or "attempts exhausted", attempt)
    steps.record_answer(answer)
    return answer
