"""Child recycling: each prefork child gets its own limit, counted in tasks, and leaves when it is spent.

Celery gives every child the same worker_max_tasks_per_child. Children that start together and
share the load evenly then reach the limit together and all restart in the same second: the
pool serves nothing meanwhile (the failure mode of pools restarting every worker at once). A
random limit per child, drawn again by each replacement, keeps recycles spread out for good.

billiard counts pool jobs towards that limit, and a micro-batch is one job of up to 64 tasks: a
limit meant to bound a leak let a child run up to 64 times as many tasks. Here the limit counts
tasks: a child never runs more than its limit (a batch that would take it past it runs only what
is left, and the main process sends the rest on as jobs of their own: batch_job.py, batcher.py).
"""

from __future__ import annotations

import random
import sys
from collections.abc import Callable
from typing import Any

from billiard.pool import EX_RECYCLE
from celery import current_app
from celery.concurrency.asynpool import Worker as CeleryPoolWorker

from inference_tasks.worker.lifecycle.child import ChildRecord
from inference_tasks.worker.lifecycle.context import current


def jittered_limit(limit: int | None, jitter: float, rng: random.Random) -> int | None:
    """A child's task limit: `limit` minus a random share of up to `jitter` of it, at least 1.

    Never above `limit`, so the configured value stays the bound an operator can rely on.
    `None` (unlimited) stays unlimited.
    """
    if not limit:
        return None
    spread = round(limit * jitter)
    return max(1, limit - rng.randint(0, spread))


def tasks_left(record: ChildRecord) -> int | None:
    """How many more tasks this process may run before it recycles; None when it has no limit."""
    if record.task_limit is None:
        return None
    return max(0, record.task_limit - record.tasks_served)


class RecyclingWorker(CeleryPoolWorker):
    """The loop of each prefork child (Celery's pool worker), recycling after its own number of tasks.

    The pool gives every child Celery's worker_max_tasks_per_child as billiard's `maxtasks`, which
    billiard's loop counts in jobs. This loop draws the child's own limit from it instead (after
    worker_process_init, so the child's hooks have run) and counts tasks (signals.count_served):
    before it waits for its next job, a child whose tasks are spent leaves with billiard's recycle
    exit code, as billiard's own loop does when it reaches `maxtasks`.
    """

    # Set by billiard's Worker (untyped): the job limit it was given, and the receive of its loop.
    maxtasks: int | None
    wait_for_job: Callable[[], Any]

    def on_loop_start(self, pid: int) -> None:
        """Draw this child's task limit, and wrap the receive its loop is about to use.

        billiard's Worker sets `wait_for_job` before it calls this hook and reads it once when its
        loop begins, right after: the wrapped receive is what the loop calls before each job.
        """
        super().on_loop_start(pid)
        if self.maxtasks:
            settings = getattr(current_app, "settings", None)
            jitter = settings.max_tasks_per_child_jitter if settings is not None else 0.0
            current().process.task_limit = jittered_limit(self.maxtasks, jitter, random.Random())
            self.maxtasks = None  # counted in tasks here, not in jobs by billiard
        receive = self.wait_for_job

        def wait_for_job() -> Any:
            if tasks_left(current().process) == 0:
                sys.exit(EX_RECYCLE)  # billiard's patched sys.exit: the child's exit code, then _do_exit
            return receive()

        self.wait_for_job = wait_for_job
