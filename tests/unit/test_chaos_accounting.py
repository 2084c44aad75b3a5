"""The chaos soak's accounting (benchmarks/chaos.py): which missing reply jobs a primary kill explains."""

from __future__ import annotations

from benchmarks.chaos import RECOVERY_S, reply_lost_in_a_failover
from benchmarks.harness.chaos.faults import Event
from benchmarks.harness.chaos.ledger import Entry, Ledger

KILL = Event("primary-kill", "redis-1", start=100.0, end=102.0)


def test_a_reply_pushed_inside_a_failover_window_is_explained_by_it_whenever_its_task_was_received():
    """Received 5 s before the kill, its result (and so its reply) stored during it: asynchronous
    replication's loss, not a bug (the quick run reported it as one about once in four runs)."""
    received_before = [("worker-a", 95.0)]
    assert reply_lost_in_a_failover(Entry("reply", 94.0, done_at=100.5), received_before, [KILL])
    assert reply_lost_in_a_failover(Entry("reply", 94.0), [("worker-a", 101.0)], [KILL])


def test_a_reply_missing_far_from_any_failover_stays_a_problem():
    far_before, far_after = 90.0, 102.0 + RECOVERY_S + 5
    assert not reply_lost_in_a_failover(Entry("reply", 89.0, done_at=far_before), [("w", far_before)], [KILL])
    assert not reply_lost_in_a_failover(Entry("reply", 89.0, done_at=far_after), [("w", far_after)], [KILL])
    assert not reply_lost_in_a_failover(Entry("reply", 89.0, done_at=100.5), [("w", 95.0)], [])


def test_a_reply_collected_before_its_push_was_confirmed_counts_for_its_task():
    """A durable push confirmed late (a retry after NotReplicated) enters the ledger after the worker
    ran the first message and its reply job was collected: the reply is still the task's (it was
    dropped as unknown, and the quick run reported "without one reply job per run", one run in seven)."""
    ledger = Ledger()
    ledger.replied("late")
    ledger.sent("late", "reply")
    ledger.sent("on-time", "reply")
    ledger.replied("on-time")
    ledger.replied("never-confirmed")
    assert ledger.entries["late"].replies == 1 and ledger.entries["on-time"].replies == 1
    assert ledger.early_replies == {"never-confirmed": 1}
