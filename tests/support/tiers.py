"""Which tier a test belongs to, from what it needs: `unit` (no Redis, no process of ours), `redis` (a
real redis-server, maybe Ruby or another short-lived process, but no worker) or `slow` (real worker
processes with the real model). docs/testing.md, "Tiers", says which to run while coding."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pytest

# Fixtures that start (or stand for) a worker process: a test using one is `slow`.
WORKER_FIXTURES = frozenset(
    {"start_worker", "inference_worker", "trainer_worker", "celery_setup", "celery_worker_cluster", "installed"}
)
# Fixtures that start a redis-server or another server process: a test using one is at least `redis`.
SERVER_FIXTURES = frozenset({"redis_server", "fresh_redis_url", "tls_files", "installed_gem"})
# Modules whose tests start servers or workers themselves, without one of the fixtures above, or
# spend a minute on the real model: a test marked `unit` that starts a redis-server or a worker fails
# (refuse_in_unit_tier), naming this table.
MODULE_TIERS = {
    "test_atomic_take": "redis",  # its own redis-server with a small maxmemory
    "test_openvino": "slow",  # exports and quantizes the real model (~80 s)
}
# Set to the running test's tier by tests/conftest.py, read by the helpers that start processes.
TIER_VARIABLE = "INFERENCE_TEST_TIER"
TIERS = ("unit", "redis", "slow")


def tier_of(item: pytest.Item) -> str:
    """The tier's name: the explicit `slow` marker, the fixtures the test uses, then MODULE_TIERS."""
    fixtures = set(getattr(item, "fixturenames", ()))
    if item.get_closest_marker("slow") or fixtures & WORKER_FIXTURES:
        return "slow"
    module = item.module.__name__.rsplit(".", 1)[-1] if item.module else ""
    if fixtures & SERVER_FIXTURES:
        return "redis"
    return MODULE_TIERS.get(module, "unit")


def refuse_in_unit_tier(what: str) -> None:
    """Fail a test marked `unit` that starts `what` (a redis-server, a worker): its tier is wrong."""
    if os.environ.get(TIER_VARIABLE) == "unit":
        raise RuntimeError(f"a test marked unit starts {what}: give its module a tier in tests/support/tiers.py")
