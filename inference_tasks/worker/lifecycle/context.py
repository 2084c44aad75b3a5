"""The one worker context: everything a worker process holds, built at worker start, read by the rest.

arq builds one `ctx` at start-up and hands it to every job; here the worker hooks (signals.py) build
a `WorkerContext` at worker_init, in the main process before any child is forked, so every prefork
child inherits it, and fill in the child's own part at worker_process_init. Tasks, batch jobs, the
pool, recycling and the control command read it through `current()`: the only place worker state is
reachable from, instead of a module global per kind of state.

A process that never started as a worker (a unit test calling a task in-process) gets an empty
context on first use: no model, so a task fails saying the process has not loaded one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from inference_tasks.worker.host.thread_budget import SharedThreadBudget
from inference_tasks.worker.kinds.model_holder import ModelHolder
from inference_tasks.worker.lifecycle.child import ChildRecord
from inference_tasks.worker.lifecycle.slots import Slots
from inference_tasks.worker.lifecycle.task_traces import TaskTraces


@dataclass
class WorkerContext:
    """What this worker process holds: its record, its model, the pool's shared slots and thread budget."""

    # Facts about this process: profile, thread budget, pool slot, recycle limit, counts (child.py).
    process: ChildRecord = field(default_factory=ChildRecord)
    # This process's model and what tasks derive from it (label vectors, heads, a batch's vectors).
    model: ModelHolder = field(default_factory=ModelHolder)
    # Per-child facts in shared memory, allocated at worker_init before any fork (slots.py).
    slots: Slots = field(default_factory=Slots)
    # INFERENCE_ADAPTIVE_THREADS: the pool's shared thread budget (thread_budget.py); None when off.
    budget: SharedThreadBudget | None = None
    # The worker's prefork pool (pool.py), set by the pool as the main process creates it; None in a
    # solo worker. The micro-batcher and the control command ask it about children.
    pool: Any = None
    # OpenTelemetry (task_traces.py): this process's provider and open task spans; None when not tracing.
    traces: TaskTraces | None = None

    def in_prefork_child(self) -> bool:
        """True in a prefork child: worker_init recorded the main process's pid, and this is another.

        False in the worker's main process, in a solo worker (it runs tasks itself) and in a process
        that never started as a worker.
        """
        main_pid = self.process.main_pid
        return main_pid is not None and main_pid != os.getpid()


# The only module-level worker state: this process's context, replaced wholesale by `start`.
_current: WorkerContext | None = None


def start() -> WorkerContext:
    """A fresh context for a worker that is starting (worker_init); replaces any earlier one."""
    global _current
    _current = WorkerContext()
    return _current


def current() -> WorkerContext:
    """This process's context: the one its worker built at start (inherited by prefork children), or
    an empty one in a process that never started as a worker."""
    global _current
    if _current is None:
        _current = WorkerContext()
    return _current
