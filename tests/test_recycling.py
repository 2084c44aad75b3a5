"""Per-child recycle limits: the jitter arithmetic, and that billiard's worker loop obeys the limit set."""

from __future__ import annotations

import random

import pytest
from billiard.pool import Worker

from inference_tasks.worker.recycling import jittered_limit, set_this_childs_task_limit


def test_limits_stay_within_the_configured_band_and_spread_out():
    """With 1000 and jitter 0.25 every limit is in [750, 1000], and they differ from child to child."""
    rng = random.Random(7)
    limits = [jittered_limit(1000, 0.25, rng) for _ in range(200)]
    assert all(750 <= limit <= 1000 for limit in limits)
    assert len(set(limits)) > 50


@pytest.mark.parametrize(("limit", "jitter", "allowed"), [(3, 0.25, {2, 3}), (1, 0.9, {1}), (50, 0.0, {50})])
def test_small_limits_and_no_jitter(limit, jitter, allowed):
    """A limit never drops below 1, and jitter 0 is Celery's fixed limit."""
    rng = random.Random(1)
    assert {jittered_limit(limit, jitter, rng) for _ in range(100)} == allowed


def test_unlimited_stays_unlimited():
    assert jittered_limit(None, 0.25, random.Random()) is None
    assert jittered_limit(0, 0.25, random.Random()) is None


class _FakePoolWorker(Worker):
    """A billiard Worker whose after_fork runs an initializer, as Celery's process_initializer does."""

    def __init__(self, initializer) -> None:  # no pipes: only the frame walk is under test
        self.initializer = initializer
        self.maxtasks = 10

    def after_fork(self) -> None:
        self.initializer()


def test_the_limit_reaches_the_billiard_worker_that_runs_the_initializer():
    """Called from inside the initializer (as worker_process_init is), the limit lands on the Worker."""
    found = []
    worker = _FakePoolWorker(lambda: found.append(set_this_childs_task_limit(4)))
    worker.after_fork()
    assert found == [True]
    assert worker.maxtasks == 4


def test_outside_a_pool_worker_nothing_is_changed():
    assert set_this_childs_task_limit(4) is False


def test_a_child_flags_its_last_task_in_memory_shared_with_the_parent():
    """pool.py: the flag a child sets before its last task is what the parent reads on its result."""
    from inference_tasks.worker import pool

    pool.flag_last_task(3, True)
    assert pool.is_running_last_task(3) and not pool.is_running_last_task(4)
    pool.flag_last_task(3, False)
    assert not pool.is_running_last_task(3)
    assert not pool.is_running_last_task(None) and not pool.is_running_last_task(pool.MAX_POOL_SLOTS)
