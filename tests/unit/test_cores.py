"""Cores from CPU affinity and a container's cgroup CPU limit (v2 cpu.max, v1 cfs quota)."""

from __future__ import annotations

import pytest

from inference_tasks.cores import available_cores, cgroup_cpu_limit


@pytest.mark.parametrize(
    ("cpu_max", "expected"), [("max 100000\n", None), ("200000 100000\n", 2.0), ("150000 100000", 1.5)]
)
def test_cgroup_v2_cpu_limit(tmp_path, cpu_max, expected):
    (tmp_path / "cpu.max").write_text(cpu_max)
    assert cgroup_cpu_limit(tmp_path / "cpu.max", tmp_path / "none") == expected


def test_cgroup_v1_cpu_limit_and_no_cgroup(tmp_path):
    (tmp_path / "cpu.cfs_quota_us").write_text("400000\n")
    (tmp_path / "cpu.cfs_period_us").write_text("100000\n")
    assert cgroup_cpu_limit(tmp_path / "missing", tmp_path) == 4.0
    (tmp_path / "cpu.cfs_quota_us").write_text("-1\n")
    assert cgroup_cpu_limit(tmp_path / "missing", tmp_path) is None
    assert cgroup_cpu_limit(tmp_path / "missing", tmp_path / "missing") is None


def test_available_cores_is_at_least_one_and_within_the_affinity():
    import os

    assert 1 <= available_cores() <= len(os.sched_getaffinity(0))
