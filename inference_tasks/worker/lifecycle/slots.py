"""Per-slot facts that prefork children write and the worker's main process reads, in shared memory.

A slot is a child's pool index: stable across recycles (a replacement takes the index of the child
it replaces). Each child writes its own slot: its pid, whether its current job is its last (pool.py reads it
to write no job to a child that is leaving), how many native compute threads it was pinned to, its
device and CUDA memory, and its precision (control.py reports them to `doctor` and the exporter).

The table is allocated once per worker, at worker_init in the main process (signals.py), before
any child is forked, so every child inherits the same memory; sized to the most children the
worker may run (its concurrency, or the autoscaler's maximum). Nothing is allocated at import. A
slot outside the table (which the sizing rules out) is reported once, never dropped silently.
"""

from __future__ import annotations

import logging
import os
from multiprocessing.sharedctypes import RawArray
from typing import Any

logger = logging.getLogger(__name__)

# The embedding cache's counters each slot keeps (worker/cache/store.py's CacheTally), in this order.
CACHE_COUNTERS = ("hits", "misses", "errors", "bytes_read", "bytes_written")

# The precision each slot's model computes in (the runtime's own choice for OpenVINO's "auto"),
# as an index into PRECISIONS; 0 = not yet known.
# Two joined by "/": an auto child routing small and large passes to two precisions (runtimes/auto/).
PRECISIONS = ("", "f32", "bf16", "f16", "int8", "int8/bf16", "int8/f32", "bf16/int8", "f32/int8", "int8/bf16/f32")


class SlotTable:
    """One entry per pool index, in memory shared by the main process and every child it forks."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.last_task: Any = RawArray("b", size)
        # The native compute threads the slot's child was pinned to; 0 = not yet known.
        self.compute_threads: Any = RawArray("i", size)
        # The slot's device (-1: CPU, N: cuda:N) and the CUDA memory its child's torch holds (MiB).
        self.device_index: Any = RawArray("i", [-1] * size)
        self.gpu_memory_mib: Any = RawArray("i", size)
        self.precision: Any = RawArray("b", size)
        # Input tokens the slot's children have read (usage.tokens summed), across recycles.
        self.tokens: Any = RawArray("q", size)
        # The slot's embedding cache counters (CACHE_COUNTERS per slot), across recycles.
        self.cache: Any = RawArray("q", size * len(CACHE_COUNTERS))
        # The pid of the slot's current child (0: none started yet), so the main process can tell
        # which slot a child it lists by pid holds.
        self.pid: Any = RawArray("i", size)
        self.reported_outside = False

    def holds(self, slot: int | None) -> bool:
        if slot is None:
            return False
        if 0 <= slot < self.size:
            return True
        if not self.reported_outside:
            self.reported_outside = True
            logger.error("pool slot %d is outside the %d-slot table: its child's facts are not shared", slot, self.size)
        return False


class Slots:
    """The worker's slot table once allocated; before that (a solo worker, a producer) every read
    answers "not known" and every write is a no-op."""

    table: SlotTable | None = None

    def allocate(self, size: int) -> None:
        """In the main process, before any child is forked (worker_init)."""
        self.table = SlotTable(max(1, size))

    def _entry(self, slot: int | None) -> SlotTable | None:
        table = self.table
        return table if table is not None and table.holds(slot) else None

    def record_pid(self, slot: int | None, pid: int) -> None:
        """Called in a child as it starts: the slot is now this process's."""
        if (table := self._entry(slot)) is not None:
            table.pid[slot] = pid

    def slot_of(self, pid: int) -> int | None:
        """The slot whose current child is `pid` (read in the main process); None if no child
        recorded it (one forked a moment ago, or a worker without slots)."""
        table = self.table
        if table is None or not pid:
            return None
        return next((slot for slot in range(table.size) if table.pid[slot] == pid), None)

    def flag_last_task(self, slot: int | None, last: bool) -> None:
        """Called in a child: whether the job it just ran (or runs) is its last one."""
        if (table := self._entry(slot)) is not None:
            table.last_task[slot] = 1 if last else 0

    def is_running_last_task(self, slot: int | None) -> bool:
        return (table := self._entry(slot)) is not None and bool(table.last_task[slot])

    def record_compute_threads(self, slot: int | None, count: int) -> None:
        """Called in a child once its pools are pinned: how many threads one parallel region may run."""
        if (table := self._entry(slot)) is not None:
            table.compute_threads[slot] = count

    def compute_threads(self, slot: int | None) -> int:
        """What the child in `slot` recorded (read in the main process); 0 if it has not yet."""
        return int(table.compute_threads[slot]) if (table := self._entry(slot)) is not None else 0

    def record_device(self, slot: int | None, device: str, gpu_memory_mib: int = 0) -> None:
        """Called in a child: the device it placed its model on, and its CUDA memory now."""
        if (table := self._entry(slot)) is not None:
            table.device_index[slot] = int(device.split(":", 1)[1]) if device.startswith("cuda:") else -1
            table.gpu_memory_mib[slot] = gpu_memory_mib

    def device_of(self, slot: int | None) -> tuple[str, int]:
        """The device the child in `slot` recorded and its CUDA memory in MiB (read in the main process)."""
        table = self._entry(slot)
        if table is None or table.device_index[slot] < 0:
            return "cpu", 0
        return f"cuda:{table.device_index[slot]}", int(table.gpu_memory_mib[slot])

    def record_precision(self, slot: int | None, precision: str | None) -> None:
        """Called in a child once its model is ready: the precision it computes in."""
        if (table := self._entry(slot)) is not None:
            table.precision[slot] = PRECISIONS.index(precision) if precision in PRECISIONS else 0

    def precision_of(self, slot: int | None) -> str | None:
        """What the child in `slot` recorded (read in the main process); None if nothing yet."""
        return (PRECISIONS[table.precision[slot]] or None) if (table := self._entry(slot)) is not None else None

    def add_tokens(self, slot: int | None, count: int) -> None:
        """Called in a child after each inference task: the input tokens it read (usage.tokens)."""
        if (table := self._entry(slot)) is not None:
            table.tokens[slot] += count

    def add_cache(self, slot: int | None, counts: dict[str, int]) -> None:
        """Called in a child after each inference task: what its embedding cache did since the last call."""
        if (table := self._entry(slot)) is not None and slot is not None:
            for offset, name in enumerate(CACHE_COUNTERS):
                table.cache[slot * len(CACHE_COUNTERS) + offset] += counts.get(name, 0)

    def cache_counts(self) -> dict[str, int]:
        """Every slot's embedding cache counters added up, since the worker started (main process)."""
        table = self.table
        width = len(CACHE_COUNTERS)
        return {
            name: sum(table.cache[slot * width + offset] for slot in range(table.size)) if table is not None else 0
            for offset, name in enumerate(CACHE_COUNTERS)
        }

    def tokens_served(self) -> int:
        """Input tokens every slot's children have read since the worker started (main process)."""
        return sum(self.table.tokens) if self.table is not None else 0


def this_childs_slot() -> int | None:
    """This prefork child's pool index; None in the main process or a solo worker."""
    from billiard.process import current_process

    return getattr(current_process(), "index", None)


def most_children(worker: Any) -> int:
    """The most prefork children `worker` may run: its concurrency ("auto": this host's CPUs, which
    Celery resolves only after worker_init) or the autoscaler's maximum, whichever is more."""
    counts = [worker.concurrency if isinstance(worker.concurrency, int) else (os.cpu_count() or 1)]
    # `--autoscale MAX,MIN` reaches the worker as an option (a string, or the CLI's parsed pair).
    autoscale = (getattr(worker, "options", None) or {}).get("autoscale")
    if isinstance(autoscale, str) and autoscale.partition(",")[0].strip().isdigit():
        counts.append(int(autoscale.partition(",")[0]))
    elif isinstance(autoscale, tuple | list) and autoscale:
        counts.append(int(autoscale[0]))
    return max(counts)
