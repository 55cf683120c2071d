"""One local Ray cluster at a time across the test processes.

A driver's ``ray.init()`` with no address joins a cluster already running on the machine
(Ray records it under its temp folder) rather than starting its own; the test modules
that start Ray run in parallel xdist workers, and a driver that had joined another test's
cluster died with it (exit 1, before its first document). The modules that start Ray
hold this lock, a file lock, while they do.
"""

from __future__ import annotations

import fcntl
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

LOCK = Path(tempfile.gettempdir()) / "ocrflow-tests-ray-cluster.lock"


@pytest.fixture(autouse=True)
def one_ray_cluster() -> Iterator[None]:
    """Hold the machine's Ray lock for the test (use it autouse in a module)."""
    with LOCK.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
