"""What this worker process is and has done: its profile and thread budget, its pool slot and recycle
limit, start-up timings, and counts of the tasks, pool jobs and micro-batches it ran.

Kept apart from the model (models.py): these are facts about the process, reported by worker_info
and the inference_processes control command, and read by recycling and batching.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ChildRecord:
    """Filled by worker hooks (signals.py), the pool and batch jobs; tasks only read it."""

    profile: str | None = None
    threads: int | None = None
    import_seconds: float | None = None
    main_pid: int | None = None
    # From this process's fork to model ready: what a recycle costs before the child serves.
    ready_seconds: float | None = None
    tasks_served: int = 0
    # Pool jobs run (a micro-batch is one job of many tasks); recycling counts tasks_served.
    jobs_done: int = 0
    # Set while a micro-batch job runs its tasks (worker/batching/batch_job.py); what batches ran.
    in_batch: bool = False
    batches_run: int = 0
    batched_tasks: int = 0
    largest_batch: int = 0
    # This prefork child's stable pool index (slots.py); None in the main or a solo process.
    pool_slot: int | None = None
    # This child's own recycle limit in tasks (recycling.py), if it has one.
    task_limit: int | None = None
