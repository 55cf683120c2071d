"""Ctrl-C and SIGTERM stop a command within seconds, whatever its workers are doing.

The first signal asks the work to stop: inside the event loop its task is cancelled (never
a ``KeyboardInterrupt`` in the middle of a callback), outside it ``KeyboardInterrupt`` is
raised; workers stop, render processes are shut down, the run record is saved, and the
command exits ``130`` (SIGINT) or ``143`` (SIGTERM: 128 + 15, as a shell reports a process
a signal ended). What has not stopped ``grace_s`` seconds later — a thread hashing a huge
file, a render that ignores its pool's shutdown, a call into an engine — is not waited
for: every child process is killed and the process ends at once with the same code. A
second signal does that right away. Nothing is lost either way: the workspace is written
so that a kill at any point leaves finished documents finished and the rest pending, and
the same command resumes.

The handlers are process-wide, as signals are: ``active_interrupts`` finds the installed
``Interrupts`` through the signal table itself, so no other state is kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any, ParamSpec, TypeVar

import psutil

#: Seconds a stop request may take before the process ends at once.
GRACE_S = 5.0
EXIT_CODES = {int(signal.SIGINT): 130, int(signal.SIGTERM): 143}
INTERRUPTED = 130
RESUME_HINT = "interrupted: run the same command again to resume"

P = ParamSpec("P")
R = TypeVar("R")


class Interrupts:
    """SIGINT and SIGTERM handlers for the duration of a ``with`` block."""

    def __init__(self, grace_s: float = GRACE_S) -> None:
        self.grace_s = grace_s
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}
        self._timer: threading.Timer | None = None
        self._cancel: Callable[[], object] | None = None

    @property
    def exit_code(self) -> int:
        """130 after SIGINT (or none yet), 143 after SIGTERM."""
        return EXIT_CODES.get(self.signum or 0, INTERRUPTED)

    def __enter__(self) -> Interrupts:
        if threading.current_thread() is threading.main_thread():
            for sig in EXIT_CODES:
                self._previous[sig] = signal.signal(sig, self._on_signal)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._timer is not None:
            self._timer.cancel()
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    @contextlib.contextmanager
    def cancelling(
        self, loop: asyncio.AbstractEventLoop, task: asyncio.Task[Any]
    ) -> Iterator[None]:
        """While ``loop`` runs ``task``: a signal cancels the task."""
        self._cancel = functools.partial(loop.call_soon_threadsafe, task.cancel)
        try:
            yield
        finally:
            self._cancel = None

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is not None:
            self._stop_now()  # a second signal: no more waiting
        self.signum = signum
        self._timer = threading.Timer(self.grace_s, self._stop_now)
        self._timer.daemon = True
        self._timer.start()
        if self._cancel is not None:
            self._cancel()
        else:
            raise KeyboardInterrupt

    def _stop_now(self) -> None:
        """End the process at once: its children killed, the signal's exit code."""
        with contextlib.suppress(Exception):
            sys.stderr.write(f"{RESUME_HINT} (stopped at once)\n")
            sys.stderr.flush()
        kill_children()
        os._exit(self.exit_code)


def kill_children() -> None:
    """Kill every process this one started (render workers, engines, servers), deepest
    first, so none is left running on its own."""
    with contextlib.suppress(psutil.Error):
        children = psutil.Process().children(recursive=True)
        for child in reversed(children):
            with contextlib.suppress(psutil.Error):
                child.kill()


def active_interrupts() -> Interrupts | None:
    """The ``Interrupts`` whose handlers are installed now, if any."""
    owner = getattr(signal.getsignal(signal.SIGINT), "__self__", None)
    return owner if isinstance(owner, Interrupts) else None


def interrupted_exit_code() -> int:
    """The exit code for a stop by signal: the installed handlers' (130 or 143), or 130."""
    interrupts = active_interrupts()
    return interrupts.exit_code if interrupts is not None else INTERRUPTED


def stoppable(command: Callable[P, R]) -> Callable[P, R]:
    """Run ``command`` (a CLI command) with ``Interrupts`` installed; a stop by signal
    anywhere in it (expanding inputs, planning, converting) prints one line and exits 130
    or 143, never a traceback."""

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with Interrupts() as interrupts:
            try:
                return command(*args, **kwargs)
            except (KeyboardInterrupt, asyncio.CancelledError):
                print(RESUME_HINT, file=sys.stderr, flush=True)
                raise SystemExit(interrupts.exit_code) from None

    return wrapper
