"""The test tiers (tests/support/tiers.py): each test has exactly one, and a test marked `unit` cannot
start a redis-server or a worker without failing."""

from __future__ import annotations

import pytest

from tests.support import tiers
from tests.support.localstack import start_redis


def test_every_collected_test_has_exactly_one_tier(request):
    """The tier comes from the fixtures a test uses; no test is left without one or given two."""
    for item in request.session.items:
        marked = [name for name in tiers.TIERS if item.get_closest_marker(name)]
        assert len(marked) == 1, f"{item.nodeid}: {marked}"


def test_a_unit_test_that_starts_a_redis_server_fails_naming_the_tier_table(tmp_path, test_tier):
    """This test uses no server fixture, so it is `unit`; starting Redis from it is refused."""
    assert test_tier == "unit"
    with pytest.raises(RuntimeError, match=r"give its module a tier in tests/support/tiers\.py"):
        start_redis(tmp_path / "redis")


def test_a_test_using_redis_is_in_the_redis_tier(redis_server, test_tier):
    """A test that asks for the session's redis-server is `redis`, not `unit`, and may start servers."""
    assert test_tier == "redis"
