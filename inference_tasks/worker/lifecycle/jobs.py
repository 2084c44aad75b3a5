"""Around each pool job in a prefork child (one task, or one micro-batch): borrowed threads, the job
count, the last-job flag and the device report.

Called by the task_prerun/postrun hooks (signals.py) for a lone task and by batch_job.py around a
micro-batch, so it lives apart from both.
"""

from __future__ import annotations

from inference_tasks import devices
from inference_tasks.worker.host import gpu
from inference_tasks.worker.lifecycle import recycling
from inference_tasks.worker.lifecycle.context import WorkerContext


def record_device(ctx: WorkerContext) -> None:
    """Tell the main process (slots.py shared memory) this child's device, CUDA memory and precision."""
    model = ctx.model.served
    device = model.device if model is not None else devices.CPU
    ctx.slots.record_device(ctx.process.pool_slot, device, gpu.gpu_memory_mib(device))
    ctx.slots.record_precision(ctx.process.pool_slot, model.precision if model is not None else None)


def job_starts(ctx: WorkerContext) -> None:
    """Before each pool job in a child (one task, or one micro-batch: batch_job.py).

    With INFERENCE_ADAPTIVE_THREADS, runs the job on the threads idle siblings leave free.
    """
    slot = ctx.process.pool_slot
    if slot is None or ctx.budget is None:  # the main process or a solo worker; or no adaptive threads
        return
    import torch

    torch.set_num_threads(ctx.budget.take(slot))


def job_ends(ctx: WorkerContext) -> None:
    """After each pool job in a child: count it, say whether it was the child's last, hand borrowed
    threads back, report GPU memory.

    The last-job flag is written before the job's result goes to the parent, which reads it when
    that result arrives (pool.py) and then writes no further job to this child: it is leaving
    (its tasks are spent, recycling.py).
    """
    record = ctx.process
    record.jobs_done += 1
    ctx.slots.flag_last_task(record.pool_slot, recycling.tasks_left(record) == 0)  # None (no limit): never last
    if ctx.model.served is not None and ctx.model.served.device.startswith(devices.CUDA):
        record_device(ctx)
    if ctx.budget is not None and record.pool_slot is not None:
        ctx.budget.give_back(record.pool_slot)
