"""The prefork pool, minus one race: the parent never hands a job to a child that is about to exit.

Celery's parent marks a child available the moment it reports a result and writes the next
job into that child's pipe. A child that has just finished its last allowed task (its recycle
limit, recycling.py) exits without reading it; the job then waits for the exit to be noticed
and for the replacement child, ~1 s per recycle (measured: 12-15 % of throughput at 50 tasks
per child). Here a child flags "this is my last task" in memory shared with the parent before
it runs that task, and the parent keeps such a child marked busy, so the job goes to a sibling
or waits for the replacement, which is forked as soon as the old child is gone.
"""

from __future__ import annotations

from multiprocessing.sharedctypes import RawArray
from typing import Any

from celery.concurrency.asynpool import AsynPool
from celery.concurrency.prefork import TaskPool as PreforkTaskPool

# One flag per pool index (stable across recycles); created at import in the worker's main
# process, before any child is forked, so every child writes to the same memory.
MAX_POOL_SLOTS = 1024
_LAST_TASK = RawArray("b", MAX_POOL_SLOTS)


def this_childs_slot() -> int | None:
    """This prefork child's pool index: stable, a replacement child gets the index it replaces.

    Keys the shared per-slot memory (the last-task flags here, thread_budget.py's counts);
    read once per child (signals.py keeps it on the model holder).
    """
    from billiard.process import current_process

    return getattr(current_process(), "index", None)


def flag_last_task(slot: int | None, last: bool) -> None:
    """Called in a child: say whether the task it is about to run is its last one."""
    if slot is not None and 0 <= slot < MAX_POOL_SLOTS:
        _LAST_TASK[slot] = 1 if last else 0


def is_running_last_task(slot: int | None) -> bool:
    return slot is not None and 0 <= slot < MAX_POOL_SLOTS and bool(_LAST_TASK[slot])


class LastTaskAwareAsynPool(AsynPool):
    def on_job_ready(self, job: Any, i: int, obj: Any, inqW_fd: int) -> None:
        process = self._fileno_to_inq.get(inqW_fd)
        if process is not None and is_running_last_task(getattr(process, "index", None)):
            return  # stays busy: it is leaving; the pool replaces it when it exits
        super().on_job_ready(job, i, obj, inqW_fd)


class TaskPool(PreforkTaskPool):
    """`worker_pool` of this app: `--pool prefork` (the default) selects it."""

    Pool = LastTaskAwareAsynPool
