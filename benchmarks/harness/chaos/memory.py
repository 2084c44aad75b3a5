"""Redis memory against its pre-fault baseline, raw and net of what Redis keeps by design.

Three things grow with the load, faults or not, and stay: one durable claim key per durably pushed
task (INFERENCE_DURABLE_CLAIM_TTL_S, an hour: a producer's retry with the same id must find it), the
dead-letter list (the hostile messages, kept INFERENCE_DEAD_LETTER_TTL_S) and the replication buffer
(the backlog replicas resume from: a new primary's starts empty after a failover and fills with writes
up to repl-backlog-size, 1 MB). Raw memory after a fault so says little about the fault; memory net
of them says whether the fault left anything behind (a stranded unacked record, a queue that never
drained, a leaked key). Each second's sample (ledger.py) holds the key count, the dead-letter list's
bytes and the replication buffers (INFO's mem_total_replication_buffers); the bytes of one kept key
are measured once at the end over every claim and redelivery counter (Redis' MEMORY USAGE), and a
sample's net memory is `used_memory - replication buffers - dead-letter bytes - keys * bytes per
kept key`. Keys that are not kept state (queue lists, results not read yet, the unacked record) are
few and counted the same way before and after, so they cancel against the baseline, taken the same way.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from inference_tasks.redis_access.keys import DURABLE_CLAIM_KEY_PREFIX, REDELIVERY_KEY_PREFIX

if TYPE_CHECKING:
    import redis

SCAN_CHUNK = 1000


@dataclass(frozen=True)
class KeptState:
    """The kept keys at the end of a run and their bytes (MEMORY USAGE, summed)."""

    durable_claims: int
    redelivery_counters: int
    kept_key_bytes: int

    @property
    def bytes_per_key(self) -> float:
        keys = self.durable_claims + self.redelivery_counters
        return self.kept_key_bytes / keys if keys else 0.0


def kept_state(client: redis.Redis) -> KeptState:
    counts, total = [], 0
    for prefix in (DURABLE_CLAIM_KEY_PREFIX, REDELIVERY_KEY_PREFIX):
        keys = list(client.scan_iter(match=f"{prefix}*", count=SCAN_CHUNK))
        counts.append(len(keys))
        for start in range(0, len(keys), SCAN_CHUNK):
            with client.pipeline(transaction=False) as pipe:
                for key in keys[start : start + SCAN_CHUNK]:
                    pipe.memory_usage(key)
                total += sum(int(used or 0) for used in pipe.execute())
    return KeptState(counts[0], counts[1], total)


def net_bytes(sample: dict[str, Any], bytes_per_key: float) -> int:
    kept = sample.get("replication_buffers", 0) + sample["dead_letter_bytes"] + sample["keys"] * bytes_per_key
    return int(sample["used_memory"] - kept)


def baseline(samples: list[dict[str, Any]], start: float, end: float, bytes_per_key: float) -> tuple[int, int] | None:
    """(raw, net) medians over the steady load before the first fault."""
    steady = [sample for sample in samples if start <= sample["at"] < end]
    if not steady:
        return None
    raw = int(statistics.median(sample["used_memory"] for sample in steady))
    return raw, int(statistics.median(net_bytes(sample, bytes_per_key) for sample in steady))


def first_sample_after(samples: list[dict[str, Any]], at: float) -> dict[str, Any] | None:
    return next((sample for sample in samples if sample["at"] >= at), None)
