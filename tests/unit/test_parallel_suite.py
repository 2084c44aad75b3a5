"""What the suite's two pytest processes rely on: the longest-first hint (tests/support/schedule.py) names
modules that exist and reorders whole modules, never a module's own tests; the passive OpenMP wait policy
reaches the processes the suite starts, where thread settings do not."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

import pytest

from tests.support.localstack import REPO_ROOT, clean_env
from tests.support.schedule import LONGEST_FIRST, longest_first


def test_every_module_named_longest_first_exists_once() -> None:
    assert [path for path in LONGEST_FIRST if not (REPO_ROOT / path).is_file()] == []
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)


def test_listed_modules_go_first_in_the_lists_order_and_each_keeps_its_tests_order() -> None:
    first, second = LONGEST_FIRST[0], LONGEST_FIRST[1]
    ids = ["tests/unit/test_a.py::one", f"{second}::x", "tests/unit/test_a.py::two", f"{first}::y", f"{second}::z"]
    items = cast(list[pytest.Item], [SimpleNamespace(nodeid=nodeid) for nodeid in ids])
    assert [item.nodeid for item in longest_first(items)] == [
        f"{first}::y", f"{second}::x", f"{second}::z", "tests/unit/test_a.py::one", "tests/unit/test_a.py::two",
    ]  # fmt: skip


def test_started_processes_get_the_wait_policy_but_no_thread_settings() -> None:
    env = clean_env({"OMP_WAIT_POLICY": "PASSIVE", "OMP_NUM_THREADS": "7", "MKL_NUM_THREADS": "7", "PATH": "/bin"})
    assert env["OMP_WAIT_POLICY"] == "PASSIVE" and env["PATH"] == "/bin"
    assert "OMP_NUM_THREADS" not in env and "MKL_NUM_THREADS" not in env
