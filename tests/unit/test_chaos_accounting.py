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


def test_memory_net_of_kept_state_leaves_out_a_new_primarys_replication_buffer_but_not_a_leak():
    """After a failover the new primary's replication buffer fills with writes (up to 1 MB, by design):
    it nets out; a megabyte that is no kept state (a leaked key, a queue left full) still shows."""
    from benchmarks.harness.chaos.memory import net_bytes

    before = {"used_memory": 4_000_000, "replication_buffers": 200_000, "dead_letter_bytes": 7_000, "keys": 100}
    after_failover = before | {"used_memory": 5_300_000, "replication_buffers": 1_500_000}
    leaked = after_failover | {"used_memory": 6_300_000}
    assert net_bytes(after_failover, 160.0) == net_bytes(before, 160.0)
    assert net_bytes(leaked, 160.0) - net_bytes(before, 160.0) == 1_000_000
    unsampled = {key: value for key, value in before.items() if key != "replication_buffers"}  # older reports
    assert net_bytes(unsampled, 160.0) == 4_000_000 - 7_000 - 16_000
