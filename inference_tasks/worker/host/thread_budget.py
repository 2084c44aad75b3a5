"""Adaptive thread budget (opt-in): a pinned child borrows the cores its idle siblings leave unused.

Pinning costs latency at low load: a lone 64-sentence request takes ~0.6 s on one thread where
two threads take ~0.45 s (benchmarks/serving.py). With INFERENCE_ADAPTIVE_THREADS=true, a child
starting a task takes the pool's budget (INFERENCE_CONCURRENCY threads) minus what busy siblings
hold, at least one, and returns it when the task ends. Under load every child holds one thread,
as pinned; alone, a child uses them all. A child that starts while a sibling holds everything
still takes its one thread, so the pool can run up to budget + children - 1 threads until that
sibling's task ends; that bounded overshoot is the price of never making a task wait.

The shared state is created in the worker's main process before it forks; each child owns the
slot of its pool index, which a replacement child reuses, so a child killed mid-task cannot leak
its threads for longer than its replacement's first task.
"""

from __future__ import annotations

import logging
import multiprocessing
from multiprocessing.sharedctypes import RawArray

logger = logging.getLogger(__name__)

# A child killed inside the (microseconds long) critical section would leave the lock taken;
# waiting this long and then running on one thread keeps the pool serving regardless.
LOCK_TIMEOUT_S = 0.05


class SharedThreadBudget:
    """Threads held per pool slot, in memory shared by the worker's processes."""

    def __init__(self, slots: int, budget: int) -> None:
        self.budget = budget
        self._held = RawArray("i", slots)
        self._lock = multiprocessing.Lock()

    def take(self, slot: int) -> int:
        """Threads this slot may use for its next task: the budget not held by others, at least 1."""
        if not 0 <= slot < len(self._held) or not self._lock.acquire(timeout=LOCK_TIMEOUT_S):
            return 1
        try:
            self._held[slot] = 0
            mine = max(1, self.budget - sum(self._held))
            self._held[slot] = mine
            return mine
        finally:
            self._lock.release()

    def give_back(self, slot: int) -> None:
        if not 0 <= slot < len(self._held) or not self._lock.acquire(timeout=LOCK_TIMEOUT_S):
            return
        try:
            self._held[slot] = 0
        finally:
            self._lock.release()
