"""What a test needs, as markers, and where it lives (docs/testing.md, "Groups").

Folders hold modules by the most any of their tests needs: tests/unit (no Redis, no process of ours),
tests/redis (a real redis-server, no worker), tests/worker (real worker processes with the real
model), tests/external (a program outside Python and Redis is the subject: the Ruby gem, Rails and
Sidekiq, a browser, network namespaces). Each test is marked with its own tier, from the fixtures it
uses (`unit`, `redis` or `worker`; never above its folder's, checked at collection), `external` when it
runs such a program (every test in tests/external, or marked so beside Python checks of the same
feature; need_program refuses an unmarked one), and `slow` when it is `worker` or `external`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pytest

TESTS = Path(__file__).resolve().parent.parent
# Fixtures that start (or stand for) a worker process: a test using one is `worker`.
WORKER_FIXTURES = frozenset(
    {"start_worker", "inference_worker", "trainer_worker", "celery_setup", "celery_worker_cluster", "installed"}
)
# Fixtures that start a redis-server or another server process: a test using one is at least `redis`.
SERVER_FIXTURES = frozenset({"redis_server", "fresh_redis_url", "tls_files", "installed_gem"})
# Fixtures that run an external program (the gem's build and install): a test using one is `external`.
EXTERNAL_FIXTURES = frozenset({"installed_gem"})
# Modules whose tests start servers or workers themselves, without one of the fixtures above, or
# spend a minute on the real model: a test marked `unit` that starts a redis-server or a worker fails
# (refuse_in_unit_tier), naming this table.
MODULE_TIERS = {
    "test_atomic_take": "redis",  # its own redis-server with a small maxmemory
    "test_openvino": "worker",  # exports and quantizes the real model (~80 s)
    "test_gem_wakeup": "redis",  # a Sentinel cluster of its own for the failover case
    "test_cache_lookup": "redis",  # a full cache: its own redis-server with a small maxmemory
}
# The tiers, by what they need, and the folders: a folder's tests need at most its tier.
TIERS = ("unit", "redis", "worker")
FOLDER_TIERS = {"unit": "unit", "redis": "redis", "worker": "worker", "external": "worker"}
EXTERNAL = "external"
SLOW = "slow"
# Programs outside Python and Redis that only a test marked `external` may run (need_program).
EXTERNAL_PROGRAMS = frozenset({"ruby", "gem", "sidekiq", "chromium", "chromium-browser", "ip", "unshare",
                               "systemd-analyze"})  # fmt: skip
# Set to the running test's tier and whether it is external by tests/conftest.py, read by the helpers
# that start processes and programs.
TIER_VARIABLE = "INFERENCE_TEST_TIER"
EXTERNAL_VARIABLE = "INFERENCE_TEST_EXTERNAL"


def folder_of(item: pytest.Item) -> str:
    """The tests/ folder holding the test's module ("" for one outside the four)."""
    parts = Path(str(item.path)).resolve().relative_to(TESTS).parts
    return parts[0] if len(parts) > 1 and parts[0] in FOLDER_TIERS else ""


def tier_of(item: pytest.Item) -> str:
    """The tier's name: an explicit `worker` marker or a worker fixture, a server fixture, then MODULE_TIERS."""
    fixtures = set(getattr(item, "fixturenames", ()))
    if item.get_closest_marker("worker") or fixtures & WORKER_FIXTURES:
        return "worker"
    if fixtures & SERVER_FIXTURES:
        return "redis"
    module = item.module.__name__.rsplit(".", 1)[-1] if item.module else ""
    return MODULE_TIERS.get(module, "unit")


def is_external(item: pytest.Item) -> bool:
    """In tests/external, marked `external`, or using a fixture that runs an external program."""
    fixtures = set(getattr(item, "fixturenames", ()))
    return folder_of(item) == EXTERNAL or bool(item.get_closest_marker(EXTERNAL)) or bool(fixtures & EXTERNAL_FIXTURES)


def misplaced(item: pytest.Item) -> str | None:
    """Why the test is in the wrong folder (it needs more than its folder's tier), or None."""
    folder = folder_of(item)
    if not folder:
        return f"{item.nodeid}: tests live in tests/unit, tests/redis, tests/worker or tests/external"
    tier = tier_of(item)
    if TIERS.index(tier) > TIERS.index(FOLDER_TIERS[folder]):
        return f"{item.nodeid}: a `{tier}` test in tests/{folder}; move its module to tests/{tier}"
    return None


def refuse_in_unit_tier(what: str) -> None:
    """Fail a test marked `unit` that starts `what` (a redis-server, a worker): its tier is wrong."""
    if os.environ.get(TIER_VARIABLE) == "unit":
        raise RuntimeError(f"a test marked unit starts {what}: give its module a tier in tests/support/tiers.py")


def refuse_unless_external(program: str) -> None:
    """Fail a test not marked `external` that runs `program` (outside a test, e.g. a benchmark: allowed)."""
    if program in EXTERNAL_PROGRAMS and os.environ.get(EXTERNAL_VARIABLE) == "0":
        raise RuntimeError(f"a test not marked external runs {program}: mark it @pytest.mark.external")
