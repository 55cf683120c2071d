"""How many CPUs this process may really use.

``os.cpu_count()`` counts the host's CPUs: under ``taskset``, a SLURM or Kubernetes cpuset,
or a container's ``--cpus`` quota it overstates them, and the defaults sized from it (render
workers, pages read at once, engine threads) then oversubscribe the CPUs the process has.
"""

from __future__ import annotations

import contextlib
import math
import os
from pathlib import Path

#: cgroup v2's CPU quota of this process's cgroup ("max 100000", or "200000 100000": 2 CPUs).
CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")


def usable_cpus(cpu_max: Path = CGROUP_CPU_MAX) -> int:
    """The CPUs this process may run on (its affinity mask), capped by a cgroup v2 quota
    rounded up; at least 1."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # macOS and Windows have no affinity mask
        cpus = os.cpu_count() or 1
    quota = _cgroup_quota(cpu_max)
    if quota is not None:
        cpus = min(cpus, quota)
    return max(1, cpus)


def _cgroup_quota(cpu_max: Path) -> int | None:
    with contextlib.suppress(OSError, ValueError):
        limit, period = cpu_max.read_text().split()[:2]
        if limit != "max" and int(period) > 0:
            return max(1, math.ceil(int(limit) / int(period)))
    return None
