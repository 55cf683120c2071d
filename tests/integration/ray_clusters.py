"""One local Ray cluster at a time across the test processes, and a run tried again when
Ray's own node did not come up.

A driver's ``ray.init()`` with no address joins a cluster already running on the machine
(Ray records it under its temp folder) rather than starting its own; the test modules
that start Ray run in parallel xdist workers, and a driver that had joined another test's
cluster died with it (exit 1, before its first document). The modules that start Ray
hold this lock, a file lock, while they do.

Ray gives its node a fixed 30 s to come up (``ray/_private/node.py``); on a 2-core CI
machine busy with two other test processes it once took longer, and the run failed with
"The current node timed out during startup" before any of our code ran. Such a run is
tried again (``until_ray_starts``): it says nothing of ours.
"""

from __future__ import annotations

import fcntl
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

LOCK = Path(tempfile.gettempdir()) / "ocrflow-tests-ray-cluster.lock"
#: What Ray says when its node did not come up in time, and how often a run is tried.
STARTUP_TIMED_OUT = "timed out during startup"
ATTEMPTS = 3


@pytest.fixture(autouse=True)
def one_ray_cluster() -> Iterator[None]:
    """Hold the machine's Ray lock for the test (use it autouse in a module)."""
    with LOCK.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def until_ray_starts(
    run: Callable[[], subprocess.CompletedProcess[str]],
) -> subprocess.CompletedProcess[str]:
    """``run()``'s result, tried up to ``ATTEMPTS`` times while it fails because Ray's node
    timed out during startup."""
    for _ in range(ATTEMPTS - 1):
        done = run()
        if done.returncode == 0 or STARTUP_TIMED_OUT not in done.stderr:
            return done
    return run()
