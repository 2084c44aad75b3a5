"""Around each pool job in a prefork child (one task, or one micro-batch): borrowed threads, the job
count, the last-job flag and the device report.

Called by the task_prerun/postrun hooks (signals.py) for a lone task and by batch_job.py around a
micro-batch, so it lives apart from both.
"""

from __future__ import annotations

from inference_tasks import devices
from inference_tasks.worker import gpu, recycling, thread_budget
from inference_tasks.worker.child import CHILD
from inference_tasks.worker.models import HOLDER
from inference_tasks.worker.slots import SLOTS


def record_device() -> None:
    """Tell the main process (slots.py shared memory) this child's device, CUDA memory and precision."""
    device = HOLDER.embedder.device if HOLDER.embedder is not None else devices.CPU
    SLOTS.record_device(CHILD.pool_slot, device, gpu.gpu_memory_mib(device))
    SLOTS.record_precision(CHILD.pool_slot, HOLDER.embedder.precision if HOLDER.embedder is not None else None)


def job_starts() -> None:
    """Before each pool job in a child (one task, or one micro-batch: batch_job.py).

    With INFERENCE_ADAPTIVE_THREADS, runs the job on the threads idle siblings leave free.
    """
    if CHILD.pool_slot is None:  # the worker's main process, or a solo worker
        return
    if thread_budget.BUDGET is not None:
        import torch

        torch.set_num_threads(thread_budget.BUDGET.take(CHILD.pool_slot))


def job_ends() -> None:
    """After each pool job in a child: count it, say whether it was the child's last, hand borrowed
    threads back, report GPU memory.

    The last-job flag is written before the job's result goes to the parent, which reads it when
    that result arrives (pool.py) and then writes no further job to this child: it is leaving
    (its tasks are spent, recycling.py).
    """
    CHILD.jobs_done += 1
    SLOTS.flag_last_task(CHILD.pool_slot, recycling.tasks_left(CHILD) == 0)  # None (no limit): never last
    if HOLDER.embedder is not None and HOLDER.embedder.device.startswith(devices.CUDA):
        record_device()
    if thread_budget.BUDGET is not None and CHILD.pool_slot is not None:
        thread_budget.BUDGET.give_back(CHILD.pool_slot)
