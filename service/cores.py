"""How many cores this process may use: the CPUs it may run on, within its CPU quota (a
container's CPU limit, cgroup v2 ``cpu.max``, or v1 ``cpu.cfs_quota_us``), rounded up.
``os.cpu_count()`` alone is the machine's count: in a pod limited to 2 CPUs on a 64-core
node it would be 64, and the service would run 64 large computations at once."""

from __future__ import annotations

import math
import os
from pathlib import Path

_V2 = Path("/sys/fs/cgroup/cpu.max")
_V1 = (Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"), Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us"))


def quota(v2: Path = _V2, v1: tuple[Path, Path] = _V1) -> float | None:
    """The CPU quota in CPUs (``1.5``), or ``None`` if there is none or it cannot be read."""
    try:
        limit, period = v2.read_text().split()[:2]
        if limit != "max" and int(limit) > 0 and int(period) > 0:
            return int(limit) / int(period)
        return None
    except (OSError, ValueError):
        pass
    try:
        limit_us, period_us = (int(path.read_text()) for path in v1)
    except (OSError, ValueError):
        return None
    return None if limit_us <= 0 or period_us <= 0 else limit_us / period_us


def available(v2: Path = _V2, v1: tuple[Path, Path] = _V1) -> int:
    """The cores this process may use: at least 1."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    limit = quota(v2, v1)
    if limit is not None:
        cpus = min(cpus, math.ceil(limit))
    return max(1, cpus)
