"""The prefork pool, minus one race: the parent never hands a job to a child that is about to exit.

Celery's parent marks a child available the moment it reports a result and writes the next
job into that child's pipe. A child that has just finished its last allowed task (its recycle
limit, recycling.py) exits without reading it; the job then waits for the exit to be noticed
and for the replacement child, with the slot empty at every recycle (figures: docs/benchmarks-log.md,
"Figures behind the code"). Here a child flags "this was my last job" in memory shared with the
parent (slots.py) before it reports the job's result, and the parent keeps such a child marked
busy, so the next job goes to a sibling or waits for the replacement, which is forked as soon as
the old child is gone.
"""

from __future__ import annotations

import logging
import signal
import time
from collections.abc import Callable
from typing import Any
from weakref import ref

from billiard.einfo import ExceptionInfo
from celery.concurrency.asynpool import AsynPool
from celery.concurrency.prefork import TaskPool as PreforkTaskPool

from inference_tasks.worker.lifecycle.context import current
from inference_tasks.worker.lifecycle.recycling import RecyclingWorker

logger = logging.getLogger(__name__)


class JobNotSent(RuntimeError):
    """The pool could not hand a job to a child (serialising it failed); given to the job's
    error_callback as if the job had failed there. The job never ran."""


# After a child's last result, look for its exit this often, for at most this long (see below).
REAP_CHECK_INTERVAL_S = 0.01
REAP_CHECK_FOR_S = 3.0


class LastTaskAwareAsynPool(AsynPool):
    # Each child's loop: its own recycle limit, counted in tasks (recycling.py).
    Worker = RecyclingWorker
    _event_loop: Any = None
    # Called (on the event loop) each time a child finishes a job and can take another:
    # the micro-batcher (worker/batching/batcher.py) hands over a batch it held while every child was busy.
    on_child_free: list[Callable[[], None]]
    # Set by Celery while it registers with the loop (billiard calls them once per child forked, and
    # once per exited child).
    on_process_up: Callable[[Any], None]
    on_process_down: Callable[[Any], None]

    # Children that exited and were replaced since the worker started (recycles and crashes),
    # for the metrics exporter.
    children_exited = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.on_child_free = []
        current().pool = self  # before the children fork: they inherit a context that names it
        super().__init__(*args, **kwargs)

    def has_idle_child(self) -> bool:
        """A child is waiting for work and no job is queued for the next free one."""
        return not self.outbound_buffer and len(self._busy_workers) < len(self._all_inqueues)

    def has_queued_jobs(self) -> bool:
        """Jobs wait in the pool for the next free child (billiard's outbound buffer)."""
        return bool(self.outbound_buffer)

    def all_children_idle(self) -> bool:
        """Every child is waiting for work (the worker is at low load)."""
        return not self.outbound_buffer and not self._busy_workers and bool(self._all_inqueues)

    def register_with_event_loop(self, hub: Any) -> None:
        """Keep the loop (to poll a leaving child), and count exited children through the pool's
        public `on_process_down` callback, which Celery sets while it registers with the loop."""
        self._event_loop = hub
        super().register_with_event_loop(hub)
        process_down = self.on_process_down

        def count_and_clean_up(process: Any) -> None:
            if not getattr(process, "dead", False):  # Celery's own handler skips these too
                self.children_exited += 1
            process_down(process)

        self.on_process_down = count_and_clean_up
        process_up = self.on_process_up

        def record_and_register(process: Any) -> None:
            # The slot's pid, as soon as the child exists (the child records it again at its start):
            # the control command finds a replacement's slot by it before the child has started.
            current().slots.record_pid(getattr(process, "index", None), process.pid)
            process_up(process)

        self.on_process_up = record_and_register

    def on_job_ready(self, job: Any, i: int, obj: Any, inqW_fd: int) -> None:
        process = self._fileno_to_inq.get(inqW_fd)
        if process is not None and current().slots.is_running_last_task(getattr(process, "index", None)):
            self._replace_when_gone(ref(process), time.monotonic() + REAP_CHECK_FOR_S)
            return  # stays busy: it is leaving; the pool replaces it when it exits
        super().on_job_ready(job, i, obj, inqW_fd)
        for listener in self.on_child_free:
            listener()

    def apply_async(self, func: Any, args: Any = (), kwds: Any = None, **options: Any) -> Any:
        """billiard's, except that a job it cannot hand to a child never raises into the caller.

        The job is pickled for the child right here (Celery's send_job); if that fails (a message
        whose arguments pickle cannot walk), the exception used to travel up into whoever asked: the
        consumer (the whole worker exited, "Unrecoverable error"), an ETA timer, or another job's
        completion when the job had waited for a free slot. Now billiard's record of the job is
        dropped, the slot it took is given back, and its error_callback gets JobNotSent, as for a
        job that failed in a child: the task fails alone (worker/celery_ext/request.py dead-letters it) and a
        micro-batch falls back to sending its tasks one by one.
        """
        try:
            return super().apply_async(func, args, kwds or {}, **options)
        except Exception as error:  # noqa: BLE001 - any failure to send costs this job only
            self._not_sent(error, options)
            return None

    def _not_sent(self, error: Exception, options: dict[str, Any]) -> None:
        correlation_id = options.get("correlation_id")
        logger.error("could not hand job %s to a child: %r", correlation_id, error)
        # ApplyResult registers itself in _cache before send_job runs: the newest entry is this job.
        newest = next(reversed(self._cache.values()), None)
        if newest is not None and newest.correlation_id == correlation_id and newest._write_to is None:
            newest.discard()
        if self._putlock is not None:
            self._putlock.release()  # the slot Celery's semaphore took for this job
        error_callback = options.get("error_callback")
        if error_callback is None:
            return
        try:
            try:
                raise JobNotSent(f"{type(error).__name__}: {error}") from error
            except JobNotSent:
                error_callback(ExceptionInfo())
        except Exception:  # as for a failed child's job: logged, never raised into the caller
            logger.exception("handling the job that could not be sent failed")

    def terminate_job(self, pid: int, sig: int | None = None) -> None:
        """`revoke(task_id, terminate=True)` stops the task: Celery's default TERM becomes SIGKILL.

        Our children ignore SIGTERM (signals.ignore_term_in_children), so that TERM sent to the whole
        process group (systemd, honcho) stays a warm shutdown. A TERM meant for one job was ignored
        too: the task was announced REVOKED and ran on to the end. Any other signal (SIGUSR1 for a
        soft stop, SIGKILL) is sent as asked.
        """
        if sig is None or sig == signal.SIGTERM:
            sig = signal.SIGKILL
        super().terminate_job(pid, sig)

    def flush(self) -> None:
        """Forget jobs no child holds, as Celery does; keep the ones already in a child's pipe.

        The consumer flushes the pool when a warm shutdown begins (and when the broker connection
        drops). Celery's flush forgets every job its child has not yet confirmed, to be
        redelivered by the broker. But a job already written into a child's pipe is read and run
        by that child all the same: its result then matches no job, the message is never acked,
        goes back to the queue at disconnect and runs a second time on another worker. On a busy
        host the child's confirmation lags by tens of milliseconds, and 1-2 of 300 tasks ran twice
        in a rolling restart under load (celery/celery#6863 introduced the forgetting, to stop a
        leak of jobs that would never finish; these ones do finish). Such jobs stay known here,
        with their children marked busy, so their results are stored and their messages acked
        while the shutdown waits for the children.
        """
        in_a_childs_pipe = [
            job
            for job in self._cache.values()
            if not job._accepted and job._write_to is not None and job._write_to._is_alive()
        ]
        super().flush()
        kept = 0
        for job in in_a_childs_pipe:
            if job._write_to._is_alive():
                self._cache[job._job] = job
                self._busy_workers.add(job._write_to.inqW_fd)
                kept += 1
        logger.info("pool flushed: kept %d job(s) already written to a child, forgot the rest", kept)

    def _replace_when_gone(self, process_ref: Any, give_up_at: float) -> None:
        """Reap the leaving child and fork its replacement as soon as it has exited.

        The pool normally notices an exit through the child's sentinel on the event loop, but a
        recycled child often stayed unreaped until the next pool event, with its slot empty
        (docs/benchmarks-log.md, "Figures behind the code"). Polling its exit status every 10 ms
        while it leaves costs nothing next to that.
        """
        process = process_ref()
        if process is None or self._event_loop is None:
            return
        if process.exitcode is not None:  # exited (billiard polls its status): reaped now, or already was
            self.maintain_pool()
        elif time.monotonic() < give_up_at:
            self._event_loop.call_later(REAP_CHECK_INTERVAL_S, self._replace_when_gone, process_ref, give_up_at)


class TaskPool(PreforkTaskPool):
    """`worker_pool` of this app: `--pool prefork` (the default) selects it."""

    Pool = LastTaskAwareAsynPool
