"""inference.worker_info: what the process that ran it is (model, runtime, threads, memory), for doctor,
the exporter and operators; it runs in a child whose model failed to load too."""

from __future__ import annotations

import os
from typing import Any

from celery import Task, shared_task

from inference_tasks.contract.specs import WORKER_INFO
from inference_tasks.routing import WORKER_INFO_TASK
from inference_tasks.worker.celery_ext.request import GuardedTask
from inference_tasks.worker.host import gpu, threads
from inference_tasks.worker.lifecycle.context import current
from inference_tasks.worker.tasks.steps import EXPECTED_ERRORS


@shared_task(name=WORKER_INFO_TASK, bind=True, base=GuardedTask, throws=EXPECTED_ERRORS)
def worker_info(self: Task, *args: Any, **kwargs: Any) -> dict[str, Any]:
    """What the process that ran this task is: model, threads as the OS and libraries see them, RSS.

    Works in a child whose model failed to load, so operators can see why.
    """
    WORKER_INFO.parse(args, kwargs, self.app.settings)
    ctx = current()
    record, holder = ctx.process, ctx.model
    model = holder.served
    parent_pid = os.getppid()
    return {
        "hostname": self.request.hostname,
        "pid": os.getpid(),
        "profile": record.profile,
        "model": model.name if model else None,
        "alias": self.app.settings.served_model.alias,
        "revision": holder.revision,  # as embed results say it (lifecycle/model_identity.py)
        "model_error": holder.error,
        "device": model.device if model else None,
        "backend": model.backend if model else self.app.settings.backend,
        "engine": getattr(model, "engine", None),
        "precision": model.precision if model else None,
        "precision_choice": getattr(model, "precision_choice", None),
        "runtime_threads": model.threads if model else None,
        # Compile settings applied for this kind of CPU (OpenVINO: openvino_encoder.host_tuning).
        "runtime_tuning": getattr(model, "tuning", None),
        "encode_batch_size": getattr(model, "batch_size", None),
        "gpu_memory": gpu.gpu_memory(model.device) if model else None,
        "mps_active": gpu.mps_active(),
        # A vector width where the model makes vectors (a sparse encoder: its vocabulary; a pair scorer: 0).
        "dim": getattr(model, "dim", 0) if model else None,
        # Vectors of two models with the same space compare (a static model bridged into its teacher's).
        "vector_space": getattr(model, "vector_space", model.name) if model else None,
        # What one task of this model may carry: producers that batch rows (the Ruby gem's backfill) size
        # and screen their batches by these, read from the fleet rather than copied.
        "limits": {"texts_per_task": self.app.settings.task_max_texts, "text_chars": self.app.settings.max_text_chars},
        "model_load_mode": holder.load_mode,
        "model_load_seconds": holder.load_seconds,
        "warmup_seconds": holder.warmup_seconds,
        "ready_seconds_after_fork": record.ready_seconds,
        "recycle_after_tasks": record.task_limit,
        "parent_import_seconds": record.import_seconds,
        "loaded_runtimes": threads.loaded_runtimes(),
        "thread_budget": record.threads,
        "adaptive_threads": ctx.budget is not None,
        # Whether this process exports OpenTelemetry traces (OTEL_* variables; worker/lifecycle/task_traces.py).
        "tracing": ctx.traces is not None,
        "tasks_served": record.tasks_served,
        "jobs_done": record.jobs_done,
        "microbatch": microbatch_report(record, self.app.settings),
        "rss_bytes": threads.rss_bytes(),
        **threads.shared_memory_report(),
        **threads.thread_report(),
        "parent": {"pid": parent_pid, "os_threads": threads.os_thread_count(parent_pid)},
        "redis_url": self.app.settings.redacted_redis_url,
        "result_redis_url": self.app.settings.redacted_results_url,
        # The fleet's embedding cache (worker/cache/): on when INFERENCE_CACHE_URL is set and the model's
        # kind is cached; off_because says why it is off where it was asked for.
        "cache": cache_report(holder.cache, holder.cache_off, self.app.settings),
    }


def microbatch_report(record: Any, settings: Any) -> dict[str, Any]:
    """worker_info's "microbatch": the settings and what this process's micro-batches have done."""
    return {
        "max_texts": settings.microbatch_max_texts,
        "wait_ms": settings.microbatch_wait_ms,
        "batches_run": record.batches_run,
        "batched_tasks": record.batched_tasks,
        "largest_batch": record.largest_batch,
    }


def cache_report(cache: Any, off_because: str | None, settings: Any) -> dict[str, Any]:
    """worker_info's "cache": on or off (and why), and where and how long entries live when on."""
    from inference_tasks.config.checks import redact

    if cache is None:
        return {"on": False, "off_because": off_because or "INFERENCE_CACHE_URL is not set"}
    return {"on": True, "url": redact(settings.cache_url), "ttl_s": settings.cache_ttl_s,
            "timeout_ms": settings.cache_timeout_ms}  # fmt: skip
