"""The benchmarks' one percentile helper (benchmarks/harness/stats.py): nearest rank, and a percent
passed where a share belongs refused (it once printed a maximum as the p99)."""

from __future__ import annotations

import pytest

from benchmarks.harness.stats import percentile


def test_percentile_is_the_nearest_rank_of_a_share():
    values = list(range(1, 201))  # 1..200
    assert percentile(values, 0.5) == 100 and percentile(values, 0.99) == 198 and percentile(values, 1) == 200
    assert percentile([3.0, 1.0, 2.0, 4.0], 0.5) == 2.0


def test_a_percent_instead_of_a_share_is_refused():
    with pytest.raises(ValueError, match=r"share must be between 0 and 1 \(0.99 for p99\), got 99"):
        percentile([1.0, 2.0], 99)
