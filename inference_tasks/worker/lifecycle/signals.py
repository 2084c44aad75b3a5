"""Every worker lifecycle hook, and nothing else; tasks only read what these hooks set up.

Imported only by this project's worker (the app's `include`, before worker_init), never by
producers. Celery signals are process-wide: each hook acts only for this package's app, so a
process that also runs another Celery app is left alone.
"""

from __future__ import annotations

import gc
import logging
import os
import signal
import time
from typing import TYPE_CHECKING, Any

from celery import current_app
from celery.concurrency import get_implementation
from celery.concurrency.prefork import TaskPool as PreforkTaskPool
from celery.signals import (
    task_failure,
    task_postrun,
    task_prerun,
    worker_init,
    worker_process_init,
    worker_process_shutdown,
    worker_ready,
)

from inference_tasks import devices
from inference_tasks.app import is_inference_app as ours
from inference_tasks.redis_access import queue_state
from inference_tasks.redis_access.connections import broker_redis, uncached_broker_redis
from inference_tasks.tracing.config import tracing_configured
from inference_tasks.worker.host import thread_budget, threads
from inference_tasks.worker.kinds.model_holder import LOAD_IN_CHILD, LOAD_PRELOADED, place_model
from inference_tasks.worker.lifecycle import (
    control,  # noqa: F401 - registers the `inference_processes` remote control command
    recycling,
    slots,
    task_traces,
)
from inference_tasks.worker.lifecycle.cache_start import open_worker_cache, refuse_cache_on_a_queue_redis
from inference_tasks.worker.lifecycle.context import WorkerContext, current, start
from inference_tasks.worker.lifecycle.jobs import job_ends, job_starts, record_device
from inference_tasks.worker.lifecycle.model_identity import identify_model
from inference_tasks.worker.lifecycle.redis_room import wait_until_redis_has_room
from inference_tasks.worker.lifecycle.start_checks import (
    refuse_memory_limit_below_footprint,
    refuse_to_start_without_a_model,
    refuse_to_start_without_the_runtime,
)
from inference_tasks.worker.runtimes.load_options import LoadOptions
from inference_tasks.worker.runtimes.registry import import_runtime, prepare_runtime

if TYPE_CHECKING:
    from inference_tasks.config import Settings

logger = logging.getLogger(__name__)


PROFILE_INFERENCE = "inference"
PROFILE_TRAINER = "trainer"


@worker_init.connect
def choose_profile_and_preimport(sender: Any, **_: Any) -> None:
    """In the worker's main process, before any child exists: fix the thread budget, import torch.

    The profile (INFERENCE_PROFILE, by default from the pool) fixes the thread budget: inference
    children serve requests with one native thread each (the OS parallelises across processes);
    the trainer is one process (a single prefork child, or the solo pool) using every core.
    The thread variables must be in the environment before torch, numpy and tokenizers load,
    since their pools read them once. Importing (never running) the served runtime's libraries here
    costs seconds once, instead of in every child where it would overrun Celery's
    worker_proc_alive_timeout; no forward pass runs in this process, because libgomp
    deadlocks a child forked after a parallel region.
    """
    if not ours(sender.app):
        return
    settings = sender.app.settings
    refuse_to_start_without_a_model(settings, list(sender.app.amqp.queues.consume_from))
    refuse_cache_on_a_queue_redis(settings)
    prefork = issubclass(get_implementation(sender.pool_cls), PreforkTaskPool)
    ctx = start()
    record = ctx.process
    if prefork:  # before any child is forked, so they all share it; sized to the most children
        ctx.slots.allocate(slots.most_children(sender))
    record.profile = settings.profile
    if record.profile == "auto":
        record.profile = PROFILE_INFERENCE if prefork else PROFILE_TRAINER
    if record.profile == PROFILE_INFERENCE:
        record.threads = 1 if settings.pin_threads else None
    else:
        record.threads = settings.trainer_threads
        if prefork and sender.concurrency != 1:
            logger.warning("trainer profile with %s children oversubscribes: use --concurrency 1", sender.concurrency)
    threads.set_offline_env(os.environ)
    if record.threads is not None:
        threads.set_thread_env(os.environ, record.threads)
    options = LoadOptions.of(settings)
    if record.profile == PROFILE_INFERENCE:
        prepare_runtime(settings, options.runtime)
    refuse_to_start_without_the_runtime(settings)
    started = time.perf_counter()
    import_runtime(settings.served_model.source, options, for_training=record.profile == PROFILE_TRAINER)
    record.import_seconds = time.perf_counter() - started
    record.main_pid = os.getpid()
    if prefork and record.profile == PROFILE_INFERENCE and settings.preload_model:
        preload_model(ctx, settings)
    if record.profile == PROFILE_INFERENCE:
        identify_model(ctx, settings)
        open_worker_cache(ctx, settings)
    if prefork and record.threads == 1 and settings.adaptive_threads:
        ctx.budget = thread_budget.SharedThreadBudget(sender.concurrency, sender.concurrency)
    # Last: the consumer connects right after worker_init, and cannot start on a full Redis.
    client = uncached_broker_redis(settings)
    try:
        wait_until_redis_has_room(client)
    finally:
        client.close()


def preload_model(ctx: WorkerContext, settings: Settings) -> None:
    """Load the model in the main process so every child, and every recycled child, starts with it.

    Only with every pool pinned to one thread first: torch then copies tensors inline, never
    entering an OpenMP parallel region, and no forward pass runs here (warm-up happens in each
    child), so forked children inherit no libgomp thread team to deadlock on. With pinning off
    (the oversubscribed control) each child loads its own copy. gc.freeze() keeps the cyclic
    collector from writing to the model's objects in children, which would un-share their pages.
    """
    if ctx.process.threads != 1:
        return
    threads.limit_loaded_pools(1)
    # Always on the CPU here: a CUDA context in this process would break every child forked
    # from it; each child moves its copy to its own device (place_model).
    ctx.model.load(settings.served_model, devices.CPU, LOAD_PRELOADED, LoadOptions.of(settings))
    gc.freeze()


@worker_ready.connect
def log_profile(sender: Any, **_: Any) -> None:
    """Say once which profile runs, its thread budget and where the model loads (logging is not set
    up yet at worker_init)."""
    if not ours(sender.app):
        return
    ctx = current()
    record, holder = ctx.process, ctx.model
    logger.info(
        "profile %s, native threads per process: %s, heavy imports in the main process: %.1f s",
        record.profile,
        record.threads or "library default (pinning off)",
        record.import_seconds or 0.0,
    )
    if ctx.budget is not None:
        logger.info("adaptive threads: a child alone may use up to %d threads", ctx.budget.budget)
    if holder.load_mode == LOAD_PRELOADED:
        logger.info("model preloaded in the main process in %.2f s; children only warm up", holder.load_seconds)
    elif holder.error:
        logger.error("model failed to load in the main process: %s", holder.error)
    elif record.profile == PROFILE_INFERENCE and sender.app.settings.preload_model:
        logger.warning("model not preloaded (needs one thread per child): each child loads its own copy")


@worker_process_init.connect
def pin_threads_and_load_model(**_: Any) -> None:
    """In each process that runs tasks (prefork child, or the solo worker): pin, load, warm up."""
    if not ours(current_app):
        return
    settings = current_app.settings
    ctx = current()
    record, holder = ctx.process, ctx.model
    if ctx.in_prefork_child():
        record.pool_slot = slots.this_childs_slot()
        ctx.slots.record_pid(record.pool_slot, os.getpid())
        ctx.slots.flag_last_task(record.pool_slot, False)  # this slot's previous child may have set it
    if record.profile is None:  # started by something other than `celery worker`
        record.profile = PROFILE_INFERENCE
        record.threads = 1 if settings.pin_threads else None
        threads.set_offline_env(os.environ)
    if record.threads is not None:
        threads.limit_loaded_pools(record.threads)
    place_model(holder, settings, record.pool_slot, record.threads)
    holder.warm_up()
    # After the warm-up, when every native pool this child will use has started.
    compute_threads = threads.compute_threads(getattr(holder.served, "threads", None))
    ctx.slots.record_compute_threads(record.pool_slot, compute_threads)
    record_device(ctx)
    record.ready_seconds = threads.process_age_seconds()
    if holder.served is not None:
        logger.info(
            "child ready %.2f s after fork (model %s, load %.2f s, warm-up %.3f s)",
            record.ready_seconds,
            holder.load_mode,
            holder.load_seconds if holder.load_mode == LOAD_IN_CHILD else 0.0,
            holder.warmup_seconds,
        )
    if record.profile == PROFILE_INFERENCE:
        refuse_memory_limit_below_footprint(settings.max_memory_per_child_mb)


@worker_process_init.connect
def start_tracing(**_: Any) -> None:
    """In each process that runs tasks, when the OTEL_* variables ask for traces: export them (after
    the fork: the SDK's export thread would not survive it)."""
    if ours(current_app) and tracing_configured(os.environ):
        ctx = current()
        settings = current_app.settings
        ctx.traces = task_traces.start(
            {"inference.model": settings.served_model.alias, "inference.profile": ctx.process.profile or ""}
        )


@task_prerun.connect
def open_task_span(sender: Any = None, task_id: str | None = None, **_: Any) -> None:
    if sender is not None and (ctx := current()).traces is not None and ours(sender.app):
        task_traces.task_started(ctx.traces, sender.name, sender.request, ctx.model.pre_encoded.get(task_id or ""))


@task_postrun.connect
def close_task_span(sender: Any = None, task_id: str | None = None, state: str | None = None, **_: Any) -> None:
    if (ctx := current()).traces is not None:
        task_traces.task_finished(ctx.traces, task_id, state)


@worker_process_init.connect
def ignore_term_in_children(**_: Any) -> None:
    """Prefork children ignore SIGTERM, so TERM to the whole process group is still a warm shutdown.

    systemd (KillMode=control-group), honcho and `kill -TERM -<pgid>` signal every process of the
    worker at once; Celery resets children to die on TERM, killing their running task. The parent
    stops idle children itself; hard time limits and cold shutdown escalate to SIGKILL.
    """
    if ours(current_app) and current().in_prefork_child():  # not a solo worker, which runs tasks itself
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


@worker_process_shutdown.connect
def end_an_exiting_child_promptly(exitcode: int | None = None, **_: Any) -> None:
    """A prefork child that is leaving ends without billiard's up-to-1-s wait.

    billiard's exiting child sends the parent a DEATH message, then sleeps up to 1 s for the
    parent's SIGTERM; a child ignoring TERM (ignore_term_in_children) slept the whole second.
    A child recycled at its task limit exits at once: its last result is already in its pipe,
    which the parent drains when it sees it gone (waiting for TERM cost 0.05-0.6 s per recycle
    with the slot empty). On a warm shutdown the child keeps billiard's handshake and ends on
    the parent's TERM, as Celery expects while it collects the last results. Either way it exits
    with the code it was leaving with, so the parent sees a recycle, not a crash.
    """
    ctx = current()
    if not ctx.in_prefork_child() or not ours(current_app):
        return
    if ctx.traces is not None:
        ctx.traces.flush()  # the buffered spans leave now: os._exit skips the SDK's own exit hook
    code = exitcode if isinstance(exitcode, int) else 0
    if recycling.tasks_left(ctx.process) == 0:
        logging.shutdown()  # flush this child's log handlers; os._exit skips interpreter cleanup
        os._exit(code)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(code))


@task_failure.connect
def remember_failure(
    sender: Any = None, task_id: str | None = None, exception: BaseException | None = None, **_: Any
) -> None:
    """Keep a line per failed task where `inference-tasks status` shows it (results expire, logs stay on their host)."""
    if sender is None or not ours(sender.app):
        return
    try:
        client = broker_redis(sender.app.settings)
        error = f"{type(exception).__name__}: {exception}"
        queue_state.record_failure(client, task_id or "", sender.name, error, sender.request.hostname or "")
    except Exception:  # bookkeeping must never change how a task fails
        logger.warning("could not record the failure of %s in Redis", task_id, exc_info=True)


@task_prerun.connect
def start_a_job(sender: Any = None, **_: Any) -> None:
    """A task that is a pool job of its own (not part of a micro-batch) starts one."""
    if sender is not None and ours(sender.app) and not (ctx := current()).process.in_batch:
        job_starts(ctx)


@task_postrun.connect
def count_served(sender: Any = None, **_: Any) -> None:
    """Count tasks run by this process, for worker_info; end the job of a task run on its own."""
    if sender is None or not ours(sender.app):
        return
    ctx = current()
    ctx.process.tasks_served += 1
    if not ctx.process.in_batch:
        job_ends(ctx)
