"""Per-child recycle limits: the jitter arithmetic, the task count, and the pool's child loop that obeys them."""

from __future__ import annotations

import random

import pytest

from inference_tasks.worker.lifecycle.child import ChildRecord
from inference_tasks.worker.lifecycle.recycling import RecyclingWorker, jittered_limit, tasks_left


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


def test_a_child_has_tasks_left_until_it_has_served_its_limit():
    """recycling.tasks_left counts tasks (every task of a micro-batch), never below 0; None: no limit."""
    record = ChildRecord(task_limit=5, tasks_served=3, jobs_done=1)
    assert tasks_left(record) == 2
    record.tasks_served = 7  # never happens (a batch runs only what is left), but stays 0
    assert tasks_left(record) == 0
    assert tasks_left(ChildRecord()) is None


def test_the_pool_gives_its_children_the_task_counting_loop():
    """Our prefork pool forks its children with RecyclingWorker (no frame walk), a subclass of Celery's."""
    from celery.concurrency.asynpool import Worker as CeleryPoolWorker

    from inference_tasks.worker.celery_ext.pool import LastTaskAwareAsynPool

    assert LastTaskAwareAsynPool.Worker is RecyclingWorker and issubclass(RecyclingWorker, CeleryPoolWorker)


def test_a_child_flags_its_last_task_in_memory_shared_with_the_parent():
    """slots.py: the flag a child sets for its last job is what the parent reads on its result; a slot
    outside the table is refused (and reported), and before the table exists nothing is shared."""
    from inference_tasks.worker.lifecycle.slots import Slots

    unallocated = Slots()
    unallocated.flag_last_task(0, True)
    assert not unallocated.is_running_last_task(0) and unallocated.compute_threads(0) == 0
    slots = Slots()
    slots.allocate(4)
    slots.flag_last_task(3, True)
    assert slots.is_running_last_task(3) and not slots.is_running_last_task(2)
    slots.flag_last_task(3, False)
    assert not slots.is_running_last_task(3)
    assert not slots.is_running_last_task(None) and not slots.is_running_last_task(4)
    slots.record_device(1, "cuda:1", 512)
    slots.record_precision(1, "bf16")
    slots.record_compute_threads(1, 1)
    assert (slots.device_of(1), slots.precision_of(1), slots.compute_threads(1)) == (("cuda:1", 512), "bf16", 1)
    assert slots.device_of(0) == ("cpu", 0) and slots.precision_of(0) is None


def test_the_slot_table_fits_the_most_children_the_worker_may_run():
    """slots.most_children: the concurrency, or the autoscaler's maximum when that is more."""
    from types import SimpleNamespace

    from inference_tasks.worker.lifecycle.slots import most_children

    assert most_children(SimpleNamespace(concurrency=2, options={})) == 2
    assert most_children(SimpleNamespace(concurrency=2, options={"autoscale": "10,3"})) == 10
    assert most_children(SimpleNamespace(concurrency=4, options={"autoscale": (3, 1)})) == 4
