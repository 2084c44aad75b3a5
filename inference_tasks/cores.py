"""How many cores this process may use: CPU affinity, capped by a container's cgroup CPU limit.

Every thread budget starts here (default concurrency, trainer threads, the doctor's verdict).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

CGROUP_V2_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")
CGROUP_V1_CPU = Path("/sys/fs/cgroup/cpu")


def available_cores() -> int:
    """Cores this process may use: its CPU affinity, capped by a cgroup CPU quota (rounded up).

    os.cpu_count() is the host's count: in a container limited to 2 CPUs on a 64-core node it
    says 64, and a worker sized from it would run 64 children on 2 CPUs' worth of time.
    """
    cores = len(os.sched_getaffinity(0))
    quota = cgroup_cpu_limit()
    return max(1, min(cores, math.ceil(quota))) if quota else cores


def cgroup_cpu_limit(v2_cpu_max: Path = CGROUP_V2_CPU_MAX, v1_dir: Path = CGROUP_V1_CPU) -> float | None:
    """The CPU limit of this process's cgroup, in CPUs (quota / period); None when unlimited or unknown."""
    try:
        quota, period = v2_cpu_max.read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        quota_us = int((v1_dir / "cpu.cfs_quota_us").read_text())
        period_us = int((v1_dir / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return quota_us / period_us if quota_us > 0 and period_us > 0 else None
