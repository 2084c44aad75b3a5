"""Remote control command `inference_processes`: a worker's main process describes its children.

`inference-tasks doctor` and the metrics exporter ask every live worker with one broadcast. The
main process answers, not a child: it replies while every child is busy, and the question never
waits in the task queue behind a backlog (the `inference.worker_info` task does, and reaches
one child only). Thread counts come from the kernel (/proc) for every child, and from each
child's own record of the native pool size it was pinned to (shared memory written at start).
"""

from __future__ import annotations

import logging
import os
import socket
from typing import Any

from celery.concurrency.prefork import TaskPool as PreforkTaskPool
from celery.worker.control import inspect_command

from inference_tasks import devices
from inference_tasks.cores import available_cores
from inference_tasks.worker.host import gpu, threads
from inference_tasks.worker.lifecycle.context import current
from inference_tasks.worker.runtimes.model_files import model_name

logger = logging.getLogger(__name__)

COMMAND = "inference_processes"


def _process_facts(pid: int) -> dict[str, Any]:
    try:
        return {"pid": pid, "os_threads": threads.os_thread_count(pid), "rss_bytes": threads.rss_bytes(pid)}
    except (OSError, RuntimeError):  # exited between listing and reading
        return {"pid": pid, "os_threads": 0, "rss_bytes": 0}


def _children(task_pool: Any, slots: Any) -> list[dict[str, Any]]:
    """Each prefork child: its pid, threads and RSS as the OS sees them, and what it recorded in its slot."""
    pids = (task_pool.info or {}).get("processes") or [] if isinstance(task_pool, PreforkTaskPool) else []
    if not pids and isinstance(task_pool, PreforkTaskPool):
        logger.warning(
            "the prefork pool lists no children (its info has no 'processes'): inference_processes "
            "reports none; re-check Celery's prefork TaskPool (docs/upstream.md)"
        )
    children = []
    for pid in pids:
        if not pid:
            continue
        slot = slots.slot_of(pid)
        device, gpu_memory_mib = slots.device_of(slot)
        children.append(
            {
                **_process_facts(pid),
                "slot": slot,
                "compute_threads": slots.compute_threads(slot),
                "device": device,
                "gpu_memory_mib": gpu_memory_mib,
                "precision": slots.precision_of(slot),
            }
        )
    return children


def _itself(own_facts: dict[str, Any], holder: Any) -> dict[str, Any]:
    """The main process as the one that runs tasks (the solo pool, which the trainer may run)."""
    device = holder.served.device if holder.served is not None else devices.CPU
    return {
        **own_facts,
        "slot": None,
        "compute_threads": threads.compute_threads(getattr(holder.served, "threads", None)),
        "device": device,
        "gpu_memory_mib": gpu.gpu_memory_mib(device),
        "precision": getattr(holder.served, "precision", None),
    }


def describe_worker(consumer: Any) -> dict[str, Any]:
    """What this worker runs: its children with their threads, and the facts that size them."""
    settings = consumer.app.settings
    ctx = current()
    record, holder = ctx.process, ctx.model
    task_pool = consumer.pool
    children = _children(task_pool, ctx.slots)
    own_facts = _process_facts(os.getpid())
    main = {**own_facts, "cuda_initialized": gpu.cuda_initialized()}
    if not isinstance(task_pool, PreforkTaskPool):
        children.append(_itself(own_facts, holder))
    return {
        "host": socket.gethostname(),
        "cores": available_cores(),
        "profile": record.profile,
        "pinned": settings.pin_threads,
        "configured_threads": record.threads,
        "adaptive_threads": settings.adaptive_threads,
        "concurrency": len(children),
        "main": main,
        "children": children,
        "model": model_name(settings.served_model.source),
        "alias": settings.served_model.alias,
        "queues": settings.catalogue.queues_of(settings.served_model.alias),
        "device_setting": settings.device,
        "backend": settings.model_backend,
        # Who runs the preloaded model's network on torch (native-bert or sentence-transformers); None off torch.
        "engine": getattr(holder.served, "engine", None),
        "openvino_precision": settings.openvino_precision,
        # What the preloaded model serves and why (worker/runtimes/openvino/precision_choice.py); None off OpenVINO.
        "precision_choice": getattr(holder.served, "precision_choice", None),
        # With INFERENCE_BACKEND=auto: what the preloaded model serves per request size, how and why
        # (worker/runtimes/auto/loader.py); None on any other runtime.
        "runtime_choice": getattr(holder.served, "runtime_choice", None),
        "mps_active": gpu.mps_active(),
        "model_load_mode": holder.load_mode,
        "model_load_seconds": holder.load_seconds,
        "import_seconds": record.import_seconds,
        "children_exited": getattr(ctx.pool, "children_exited", 0),
        # Input tokens read by this worker's children since it started (usage.tokens summed; a
        # counter that restarts with the worker).
        "tokens_served": ctx.slots.tokens_served(),
        # The embedding cache (worker/cache/): None when off, else its counters since the worker started.
        "cache": None if holder.cache is None else ctx.slots.cache_counts(),
        "max_tasks_per_child": settings.max_tasks_per_child,
    }


@inspect_command(name=COMMAND)
def inference_processes(state: Any, **_: Any) -> dict[str, Any]:
    """Registered in every worker that imports this module (signals.py does)."""
    return describe_worker(state.consumer)
