"""The test groups (tests/support/tiers.py): each test has exactly one tier and sits in a folder that
allows it, a test marked `unit` cannot start a redis-server or a worker, and only a test marked
`external` may run Ruby, a browser or the netns tools."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.support import tiers
from tests.support.localstack import start_redis
from tests.support.programs import need_program


def test_every_collected_test_has_exactly_one_tier_and_slow_means_worker_or_external(request):
    """The tier comes from the fixtures a test uses; no test is left without one or given two."""
    for item in request.session.items:
        marked = [name for name in tiers.TIERS if item.get_closest_marker(name)]
        assert len(marked) == 1, f"{item.nodeid}: {marked}"
        slow = marked == ["worker"] or bool(item.get_closest_marker("external"))
        assert bool(item.get_closest_marker("slow")) == slow, item.nodeid
        assert tiers.misplaced(item) is None


def planted(folder: str, fixtures: tuple[str, ...]) -> SimpleNamespace:
    """A stand-in for a collected test in tests/<folder>, using `fixtures` (what tiers.py reads of one)."""
    return SimpleNamespace(
        path=tiers.TESTS / folder / "test_planted.py", nodeid=f"tests/{folder}/test_planted.py::test_x",
        fixturenames=fixtures, module=SimpleNamespace(__name__="test_planted"), get_closest_marker=lambda name: None,
    )  # fmt: skip


def test_a_test_needing_more_than_its_folder_is_reported_and_one_in_place_is_not():
    assert tiers.misplaced(planted("unit", ("redis_server",))) == (
        "tests/unit/test_planted.py::test_x: a `redis` test in tests/unit; move its module to tests/redis"
    )
    assert tiers.misplaced(planted("redis", ("start_worker",))) is not None
    assert tiers.misplaced(planted("worker", ("redis_server",))) is None
    assert tiers.misplaced(planted("external", ("start_worker",))) is None
    assert tiers.folder_of(planted("external", ())) == "external"
    assert tiers.is_external(planted("external", ())) and not tiers.is_external(planted("worker", ()))
    assert Path(str(planted("unit", ()).path)).parent.name == "unit"


def test_a_unit_test_that_starts_a_redis_server_fails_naming_the_tier_table(tmp_path, test_tier):
    """This test uses no server fixture, so it is `unit`; starting Redis from it is refused."""
    assert test_tier == "unit"
    with pytest.raises(RuntimeError, match=r"give its module a tier in tests/support/tiers\.py"):
        start_redis(tmp_path / "redis")


def test_a_test_not_marked_external_may_not_run_ruby():
    """need_program refuses an external program to a test without the `external` marker."""
    with pytest.raises(RuntimeError, match=r"runs ruby: mark it @pytest\.mark\.external"):
        need_program("ruby", "ruby")


@pytest.mark.external
def test_a_test_marked_external_may():
    assert need_program("ruby", "ruby ruby-redis")


def test_a_test_using_redis_is_in_the_redis_tier(redis_server, test_tier):
    """A test that asks for the session's redis-server is `redis`, not `unit`, and may start servers."""
    assert test_tier == "redis"
