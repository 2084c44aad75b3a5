"""Percentiles and latency summaries: one definition, so every script's p50 and p95 mean the same."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence


def percentile(values: Sequence[float], share: float) -> float:
    """The nearest-rank percentile: the smallest value with at least `share` (0-1) of the values at or
    below it (p50 of 4 values: the 2nd; p95 of 20: the 19th). A share over 1 (a percent, 99 for 0.99)
    is refused: it silently read as the maximum once (docs/benchmarks-log.md, "Every runtime in one run")."""
    if not 0 <= share <= 1:
        raise ValueError(f"share must be between 0 and 1 (0.99 for p99), got {share}")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(share * len(ordered)) - 1))]


def latency_summary(latencies: Sequence[float]) -> dict[str, float]:
    """Mean, p50 and p95 of `latencies`, in seconds."""
    return {
        "latency_mean_s": statistics.fmean(latencies),
        "latency_p50_s": percentile(latencies, 0.5),
        "latency_p95_s": percentile(latencies, 0.95),
    }
