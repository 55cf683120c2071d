"""The CPUs a process may use: its affinity mask and its cgroup quota, not the host's count."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ocrflow.config import EngineOptions, RenderOptions
from ocrflow.config.machine import usable_cpus

HAS_AFFINITY = hasattr(os, "sched_setaffinity")


@pytest.mark.parametrize(
    ("cpu_max", "quota"),
    [("max 100000\n", None), ("200000 100000\n", 2), ("150000 100000\n", 2), ("50000 100000", 1)],
)
def test_a_cgroup_quota_caps_the_count(tmp_path: Path, cpu_max: str, quota: int | None) -> None:
    path = tmp_path / "cpu.max"
    path.write_text(cpu_max)
    unlimited = usable_cpus(tmp_path / "absent")
    assert usable_cpus(path) == (unlimited if quota is None else min(unlimited, quota))


def test_an_unreadable_quota_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "cpu.max"
    path.write_text("garbage")
    assert usable_cpus(path) == usable_cpus(tmp_path / "absent") >= 1


@pytest.mark.skipif(not HAS_AFFINITY, reason="no CPU affinity on this OS")
def test_the_defaults_follow_the_affinity_mask() -> None:
    # As under `taskset -c 0`: one CPU, whatever the host has.
    code = (
        "import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))});"
        "from ocrflow.config import RenderOptions, EngineOptions;"
        "from ocrflow.engines.embedded import default_threads;"
        "print(RenderOptions().workers, EngineOptions().parallel, default_threads(1))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["1", "1", "1"]
    # Without the mask the same defaults come from the usable count (this machine's).
    cpus = usable_cpus()
    assert RenderOptions().workers == min(4, cpus)
    assert EngineOptions().parallel == min(2, cpus)
