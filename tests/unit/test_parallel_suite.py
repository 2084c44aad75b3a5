"""What the suite's two pytest processes rely on: the longest-first hint (tests/support/schedule.py) names
modules that exist and reorders whole modules, never a module's own tests."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

import pytest

from tests.support.localstack import REPO_ROOT
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
