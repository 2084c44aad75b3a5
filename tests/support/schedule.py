"""The order modules are handed to the suite's two pytest processes (scripts/test.sh: `-n 2 --dist
loadfile --no-loadscope-reorder`): the longest first, so that the run does not end with one process
alone on a long module while the other has finished (longest-processing-time-first scheduling).

xdist's own reorder sorts modules by their number of tests, which sent the single-test quick chaos soak
and the static lane's distillation to the end. The list is a hint, not a contract: a module missing
from it only runs later; `tests/unit/test_parallel_suite.py` fails on a name that no longer exists. Figures
behind it: docs/testing.md, "Speed".
"""

from __future__ import annotations

import os

import pytest

# Module wall times of 25-130 s each on the 2-core AVX2 EPYC (2026-12-07, two processes), longest first.
LONGEST_FIRST = (
    "tests/worker/test_openvino.py",
    "tests/worker/test_auto_runtime.py",
    "tests/worker/test_results_memory.py",
    "tests/worker/test_request_contract.py",
    "tests/worker/test_worker_lifecycle.py",
    "tests/worker/test_chaos.py",
    "tests/worker/test_static.py",
    "tests/worker/test_delivery_e2e.py",
    "tests/worker/test_acl.py",
    "tests/worker/test_faults.py",
    "tests/worker/test_microbatch.py",
    "tests/worker/test_training.py",
    "tests/worker/test_model_pools.py",
    "tests/worker/test_operations.py",
    "tests/external/test_rails_pgvector.py",
    "tests/worker/test_devices.py",
)


def running_in_parallel() -> bool:
    """Inside an xdist worker process (PYTEST_XDIST_WORKER is set there, and only there)."""
    return "PYTEST_XDIST_WORKER" in os.environ


def longest_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """`items` with the listed modules' tests first, in the list's order; every module keeps its own
    tests' order, and unlisted modules keep theirs after the listed ones."""
    rank = {path: index for index, path in enumerate(LONGEST_FIRST)}

    def key(indexed: tuple[int, pytest.Item]) -> tuple[int, int]:
        position, item = indexed
        return rank.get(item.nodeid.split("::", 1)[0], len(rank)), position

    return [item for _, item in sorted(enumerate(items), key=key)]
