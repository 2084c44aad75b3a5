"""Every worker lifecycle hook, and nothing else; tasks only read what these hooks set up."""

from __future__ import annotations

import logging
import os
import resource
import signal
import time
from typing import Any

from celery import current_app
from celery.concurrency import get_implementation
from celery.signals import (
    task_failure,
    task_postrun,
    task_success,
    worker_init,
    worker_process_init,
    worker_ready,
)

from inference_tasks import replies, threads
from inference_tasks.models import HOLDER

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
    since their pools read them once. Importing (never running) torch and sentence_transformers
    here costs ~11 s once, instead of in every child where it would overrun Celery's
    worker_proc_alive_timeout; no forward pass runs in this process, because libgomp
    deadlocks a child forked after a parallel region.
    """
    settings = sender.app.settings
    prefork = get_implementation(sender.pool_cls).__module__ == "celery.concurrency.prefork"
    HOLDER.profile = settings.profile
    if HOLDER.profile == "auto":
        HOLDER.profile = PROFILE_INFERENCE if prefork else PROFILE_TRAINER
    if HOLDER.profile == PROFILE_INFERENCE:
        HOLDER.threads = 1 if settings.pin_threads else None
    else:
        HOLDER.threads = settings.trainer_threads
        if prefork and sender.concurrency != 1:
            logger.warning("trainer profile with %s children oversubscribes: use --concurrency 1", sender.concurrency)
    threads.set_offline_env(os.environ)
    if HOLDER.threads is not None:
        threads.set_thread_env(os.environ, HOLDER.threads)
    started = time.perf_counter()
    import sentence_transformers  # noqa: F401 - imported for its side effect: loaded once, shared by fork
    import torch  # noqa: F401

    HOLDER.import_seconds = time.perf_counter() - started
    HOLDER.main_pid = os.getpid()


@worker_ready.connect
def log_profile(**_: Any) -> None:
    """Say once which profile runs and its thread budget (logging is not set up at worker_init)."""
    logger.info(
        "profile %s, native threads per process: %s, heavy imports in the main process: %.1f s",
        HOLDER.profile,
        HOLDER.threads or "library default (pinning off)",
        HOLDER.import_seconds or 0.0,
    )


@worker_process_init.connect
def pin_threads_and_load_model(**_: Any) -> None:
    """In each process that runs tasks (prefork child, or the solo worker): pin, load, warm up."""
    settings = current_app.settings  # type: ignore[attr-defined]
    if HOLDER.profile is None:  # started by something other than `celery worker`
        HOLDER.profile = PROFILE_INFERENCE
        HOLDER.threads = 1 if settings.pin_threads else None
        threads.set_offline_env(os.environ)
    if HOLDER.threads is not None:
        threads.limit_loaded_pools(HOLDER.threads)
    HOLDER.load(settings.model, settings.device)
    if HOLDER.profile == PROFILE_INFERENCE:
        refuse_memory_limit_below_footprint(settings.max_memory_per_child_mb)


def refuse_memory_limit_below_footprint(limit_mb: int) -> None:
    """Stop the worker if a freshly loaded child already exceeds worker_max_memory_per_child.

    Celery compares the limit with the child's peak RSS after every task: a limit below what the
    model needs recycles every child after its first task, forever (a reload each time). That is
    a configuration error; the whole worker stops (warm shutdown: nothing is lost) and says why.
    """
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if peak_mb < limit_mb:
        return
    logger.critical(
        "INFERENCE_MAX_MEMORY_PER_CHILD_MB=%d is below the %.0f MB a child reaches just by loading and "
        "warming up the model: every child would be recycled after each task. Stopping the worker; "
        "set it to at least %.0f MB (about 1.5 x the loaded footprint).",
        limit_mb,
        peak_mb,
        peak_mb * 1.5,
    )
    os.kill(os.getppid(), signal.SIGTERM)


@worker_process_init.connect
def ignore_term_in_children(**_: Any) -> None:
    """Prefork children ignore SIGTERM, so TERM to the whole process group is still a warm shutdown.

    systemd (KillMode=control-group), honcho and `kill -TERM -<pgid>` signal every process of the
    worker at once; Celery resets children to die on TERM, killing their running task. The parent
    stops idle children itself; hard time limits and cold shutdown escalate to SIGKILL.
    """
    if HOLDER.main_pid not in (None, os.getpid()):  # a prefork child, not the solo main process
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


@task_success.connect
def reply_on_success(sender: Any = None, result: Any = None, **_: Any) -> None:
    """Push the Sidekiq reply a message asked for (replies.py) after its task succeeded."""
    replies.reply(sender.request, sender.app.settings, "SUCCESS", result=result)


@task_failure.connect
def reply_on_failure(sender: Any = None, exception: BaseException | None = None, **_: Any) -> None:
    """Push the Sidekiq reply a message asked for after its task failed."""
    replies.reply(sender.request, sender.app.settings, "FAILURE", error=exception)


@task_postrun.connect
def count_served(**_: Any) -> None:
    """Count tasks run by this process, for worker_info."""
    HOLDER.tasks_served += 1
