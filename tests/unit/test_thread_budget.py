"""The shared thread budget's arithmetic (the worker-level behaviour is in test_worker_lifecycle)."""

from __future__ import annotations

from inference_tasks.worker.host.thread_budget import SharedThreadBudget


def test_alone_a_child_takes_the_whole_budget_and_others_get_one():
    budget = SharedThreadBudget(slots=4, budget=4)
    assert budget.take(0) == 4
    assert budget.take(1) == 1  # the overshoot: never zero, never a wait
    budget.give_back(0)
    assert budget.take(2) == 3  # slot 1 still holds one
    budget.give_back(1)
    budget.give_back(2)
    assert budget.take(3) == 4


def test_a_slot_that_never_gave_back_is_reset_by_its_next_task():
    """A child killed mid-task leaves its threads held; its replacement (same slot) resets them."""
    budget = SharedThreadBudget(slots=2, budget=2)
    assert budget.take(0) == 2  # this child dies without give_back
    assert budget.take(1) == 1
    budget.give_back(1)
    assert budget.take(0) == 2


def test_unknown_slots_run_on_one_thread():
    budget = SharedThreadBudget(slots=2, budget=2)
    assert budget.take(5) == 1
    assert budget.take(-1) == 1
    budget.give_back(5)  # ignored
    assert budget.take(0) == 2
