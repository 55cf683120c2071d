"""Where ``ocrflow run``'s start and end go: the moments of its first steps, seconds from
the command's start (``T0``, a ``time.time()`` taken by the caller just before launching).

Run: ``T0=$(date +%s.%N) python bench/gpu/start_trace.py run PDFS -o OUT --engine openai
--server URL --model olmocr --recipe olmocr ...`` (``ocrflow_bench.py``'s arguments). Each
step prints once, to stderr, when it first starts and ends: the imports, planning, the
render pool, the engine, readiness, the first document's probe and render, the first
request; at exit, the last answer and the interpreter's exit path. Issue 21: ocrflow's lead
over a bare client is this start.
"""

from __future__ import annotations

import atexit
import functools
import os
import sys
import time
from collections.abc import Callable
from typing import Any

T0 = float(os.environ.get("T0", time.time()))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import ocrflow_bench  # noqa: E402  (the olmOCR recipe made fit for random weights)

from ocrflow.engines import openai  # noqa: E402
from ocrflow.executors import item_loop, local, worker  # noqa: E402
from ocrflow.pipeline import documents  # noqa: E402
from ocrflow.render import pool  # noqa: E402
from ocrflow.workspace.state import Workspace  # noqa: E402

SEEN: set[str] = set()
LAST_ANSWER = [0.0]


def note(what: str) -> None:
    """Print ``what`` with its time, the first time only."""
    if what not in SEEN:
        SEEN.add(what)
        print(f"{time.time() - T0:7.3f} {what}", file=sys.stderr, flush=True)


def timed_async(owner: Any, name: str) -> None:
    """Note the first start and end of the coroutine method ``owner.name``."""
    original: Callable[..., Any] = getattr(owner, name)

    @functools.wraps(original)
    async def traced(*args: Any, **kwargs: Any) -> Any:
        note(f"{name} start")
        result = await original(*args, **kwargs)
        note(f"{name} end")
        return result

    setattr(owner, name, traced)


def timed(owner: Any, name: str) -> None:
    """Note the first start and end of the plain method ``owner.name``."""
    original: Callable[..., Any] = getattr(owner, name)

    @functools.wraps(original)
    def traced(*args: Any, **kwargs: Any) -> Any:
        note(f"{owner.__name__}.{name} start")
        result = original(*args, **kwargs)
        note(f"{owner.__name__}.{name} end")
        return result

    setattr(owner, name, traced)


def install() -> None:
    """Wrap the steps of a run's start and end."""
    original_post = openai.OpenAIEngine._post

    async def post(self: Any, *args: Any, **kwargs: Any) -> Any:
        note("first request sent")
        result = await original_post(self, *args, **kwargs)
        LAST_ANSWER[0] = time.time() - T0
        return result

    openai.OpenAIEngine._post = post  # type: ignore[method-assign]
    original_work = worker.work

    async def work(*args: Any, **kwargs: Any) -> Any:
        note("work() called")
        return await original_work(*args, **kwargs)

    local.work = work  # type: ignore[assignment]
    timed(Workspace, "bind")
    timed(pool.RenderPool, "__init__")
    timed(openai.OpenAIEngine, "__init__")
    timed_async(openai.OpenAIEngine, "wait_ready")
    timed_async(pool.RenderPool, "probe")
    timed_async(pool.RenderPool, "render")
    timed_async(item_loop.ItemLoop, "run")
    timed_async(documents.DocumentPipeline, "finish")
    timed_async(documents.DocumentPipeline, "close_outputs")
    atexit.register(lambda: print(f"{LAST_ANSWER[0]:7.3f} last answer", file=sys.stderr))
    atexit.register(lambda: note("exit handlers"))


if __name__ == "__main__":
    note("imports done")
    ocrflow_bench._install()
    install()
    from ocrflow.cli import main

    sys.argv = ["ocrflow", *sys.argv[1:]]
    main()
