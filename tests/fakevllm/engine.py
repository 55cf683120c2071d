"""Continuous-batching capacity model of a vLLM engine, advanced arithmetically.

The model: at most ``max_num_seqs`` sequences run at once; every engine step emits one
token for each running sequence; a step lasts ``step_base_s + step_per_seq_s * running``.
A request needing ``n`` output tokens that is admitted when the step counter reads ``s``
finishes when the counter reaches ``s + n``. Requests beyond ``max_num_seqs`` wait in an
unbounded FIFO queue, as in vLLM, and are admitted at the next step boundary where a slot
is free.

No per-token or per-request work happens per step: one asyncio loop sleeps until the next
step at which something finishes (or until a new arrival can join the batch), then advances
the step counter by the number of steps that passed. Finishing requests sit in a heap keyed
by their finish step. Cancelled requests (client gone) leave the counts at once and are
skipped lazily when they reach the front of the queue or the heap.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
from collections import deque
from dataclasses import dataclass


class EngineDeadError(RuntimeError):
    """Raised into every pending request when the engine is declared dead."""


@dataclass(frozen=True)
class Capacity:
    """Step-time parameters of the capacity model."""

    max_num_seqs: int
    step_base_s: float
    step_per_seq_s: float

    def step_time(self, running: int) -> float:
        """Duration of one engine step with ``running`` sequences in the batch."""
        return self.step_base_s + self.step_per_seq_s * running

    def full_batch_tokens_per_s(self) -> float:
        """Tokens per second the engine emits with a full batch."""
        return self.max_num_seqs / self.step_time(self.max_num_seqs)

    @classmethod
    def from_pages_per_s(
        cls, pages_per_s: float, max_num_seqs: int, tokens_per_page: int, base_fraction: float
    ) -> Capacity:
        """Capacity whose full batch yields ``pages_per_s`` pages of ``tokens_per_page``.

        A full step lasts ``max_num_seqs / (pages_per_s * tokens_per_page)``;
        ``base_fraction`` of it is the fixed part, the rest grows linearly with the batch.
        """
        full_step = max_num_seqs / (pages_per_s * tokens_per_page)
        base = full_step * base_fraction
        return cls(max_num_seqs, base, (full_step - base) / max_num_seqs)


class SeqRequest:
    """One sequence inside the engine (waiting, running, finished or cancelled)."""

    __slots__ = ("future", "n_tokens", "prompt_tokens", "start_step", "state")

    def __init__(self, n_tokens: int, prompt_tokens: int, future: asyncio.Future[None]) -> None:
        self.n_tokens = n_tokens
        self.prompt_tokens = prompt_tokens
        self.start_step = -1
        self.state = "waiting"
        self.future = future


class Engine:
    """The capacity model: one asyncio task advancing all running sequences per step."""

    #: how far the engine may fall behind its schedule before it resets to "now" (s)
    MAX_LAG_S = 0.05

    def __init__(self, capacity: Capacity, kv_cache_tokens: int) -> None:
        self.capacity = capacity
        self.kv_cache_tokens = kv_cache_tokens
        self.step = 0
        self.busy_s = 0.0
        self.generation_tokens = 0
        self.running = 0
        self.waiting = 0
        self.max_running_seen = 0
        self.lag_resets = 0
        self.dead = False
        self._queue: deque[SeqRequest] = deque()
        self._heap: list[tuple[int, int, SeqRequest]] = []
        self._seq = itertools.count()
        self._sum_prompt = 0
        self._sum_start = 0
        self._wake: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None

    # ----------------------------------------------------------------- public API
    def start(self) -> None:
        """Start the engine loop on the running event loop."""
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        """Cancel the engine loop."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def submit(self, n_tokens: int, prompt_tokens: int) -> SeqRequest:
        """Queue a sequence of ``n_tokens`` output tokens; await ``.future`` for its end."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        req = SeqRequest(max(1, n_tokens), prompt_tokens, future)
        if self.dead:
            future.set_exception(EngineDeadError("EngineCore died"))
            return req
        self._queue.append(req)
        self.waiting += 1
        self._poke()
        return req

    def cancel(self, req: SeqRequest) -> None:
        """Abort a sequence whose client went away (frees its slot at once)."""
        if req.state == "waiting":
            self.waiting -= 1
        elif req.state == "running":
            self._leave(req)
        else:
            return
        req.state = "cancelled"

    def kill(self) -> None:
        """Declare the engine dead: fail every pending sequence, accept no more."""
        self.dead = True
        for req in list(self._queue) + [entry[2] for entry in self._heap]:
            if req.state in ("waiting", "running") and not req.future.done():
                req.future.set_exception(EngineDeadError("EngineCore died"))
            req.state = "cancelled"
        self._queue.clear()
        self._heap.clear()
        self.running = self.waiting = self._sum_prompt = self._sum_start = 0
        self._poke()

    def kv_cache_usage(self) -> float:
        """Fraction of the notional KV cache held by running sequences (0..1)."""
        generated = self.running * self.step - self._sum_start
        used = self._sum_prompt + generated
        return min(1.0, used / self.kv_cache_tokens) if self.kv_cache_tokens else 0.0

    def snapshot(self) -> dict[str, float | int]:
        """Counters for ``/stats``."""
        return {
            "steps": self.step,
            "busy_s": round(self.busy_s, 6),
            "generation_tokens": self.generation_tokens,
            "running": self.running,
            "waiting": self.waiting,
            "max_running_seen": self.max_running_seen,
            "mean_batch": round(self.generation_tokens / self.step, 3) if self.step else 0.0,
            "lag_resets": self.lag_resets,
            "dead": self.dead,
        }

    # ----------------------------------------------------------------- internals
    def _poke(self) -> None:
        """Wake the engine loop if it sleeps interruptibly."""
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    def _leave(self, req: SeqRequest) -> None:
        """Remove a running sequence from the batch counts."""
        self.running -= 1
        self._sum_prompt -= req.prompt_tokens
        self._sum_start -= req.start_step

    def _admit(self) -> None:
        """Move waiting sequences into the batch while slots are free."""
        limit = self.capacity.max_num_seqs
        while self.running < limit and self._queue:
            req = self._queue.popleft()
            if req.state != "waiting":
                continue
            self.waiting -= 1
            req.state = "running"
            req.start_step = self.step
            self.running += 1
            self._sum_prompt += req.prompt_tokens
            self._sum_start += self.step
            heapq.heappush(self._heap, (self.step + req.n_tokens, next(self._seq), req))
        self.max_running_seen = max(self.max_running_seen, self.running)

    def _steps_to_next_finish(self) -> int:
        """Steps until the earliest running sequence finishes (drops stale heap entries)."""
        while self._heap and self._heap[0][2].state != "running":
            heapq.heappop(self._heap)
        return self._heap[0][0] - self.step if self._heap else 1

    def _advance(self, steps: int, duration: float) -> None:
        """Account ``steps`` engine steps and finish the sequences that are done."""
        self.step += steps
        self.busy_s += duration
        self.generation_tokens += steps * self.running
        heap = self._heap
        while heap and heap[0][0] <= self.step:
            req = heapq.heappop(heap)[2]
            if req.state != "running":
                continue
            self._leave(req)
            req.state = "finished"
            if not req.future.done():
                req.future.set_result(None)

    async def _sleep_until(self, deadline: float, interruptible: bool) -> None:
        """Sleep until ``deadline`` (loop time), or until poked when ``interruptible``."""
        loop = asyncio.get_running_loop()
        delay = deadline - loop.time()
        if delay <= 0:
            return
        if not interruptible:
            await asyncio.sleep(delay)
            return
        self._wake = loop.create_future()
        handle = loop.call_later(delay, self._poke) if math.isfinite(delay) else None
        try:
            await self._wake
        finally:
            if handle is not None:
                handle.cancel()
            self._wake = None

    async def _run(self) -> None:
        """Engine loop: admit, sleep to the next interesting step boundary, advance."""
        loop = asyncio.get_running_loop()
        t_boundary = loop.time()
        while not self.dead:
            self._admit()
            if self.running == 0:
                await self._sleep_until(math.inf, interruptible=True)
                t_boundary = loop.time()
                continue
            now = loop.time()
            if now - t_boundary > self.MAX_LAG_S:
                self.lag_resets += 1
                t_boundary = now
            dt = self.capacity.step_time(self.running)
            k = self._steps_to_next_finish()
            can_join = self.waiting == 0 and self.running < self.capacity.max_num_seqs
            await self._sleep_until(t_boundary + k * dt, interruptible=can_join)
            if self.dead:
                return
            elapsed = loop.time() - t_boundary
            steps = min(k, max(1, math.ceil(elapsed / dt - 1e-9)))
            await self._sleep_until(t_boundary + steps * dt, interruptible=False)
            t_boundary += steps * dt
            self._advance(steps, steps * dt)
