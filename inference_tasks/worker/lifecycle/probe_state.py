"""The worker's side of `inference-tasks probe`: its main process writes what it is, every second, from
its event loop.

Kubernetes and systemd ask a worker two things: is it alive (restart it if not), and can it serve
(send it traffic, count it in a roll-out). `celery inspect ping` answers both badly: a broadcast to
the whole fleet through Redis, seconds per call, and a frozen worker looks like a slow one. Here the
main process rewrites one small file per worker node on a timer of its own event loop, so the file's
age says whether that loop turns (a main process frozen or stuck stops rewriting it), and the file
says whether the model is loaded and how many children have warmed up. The probe (ops/probe.py)
reads the file locally, pings Redis itself, and never broadcasts.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from pathlib import Path
from typing import Any

from celery import bootsteps
from celery.concurrency.prefork import TaskPool as PreforkTaskPool

from inference_tasks.worker.lifecycle.context import current

logger = logging.getLogger(__name__)

# How often the main process rewrites its state; the probe's default max age is several of these.
BEAT_S = 1.0
# While the consumer is stopped to reconnect to Redis, Celery's retry loop blocks the event loop: the
# worker is not ready, but counted alive for this long (a Redis outage must not restart every worker).
RECONNECT_GRACE_S = 60.0


def state_file(probe_dir: Path, node: str) -> Path:
    """The state file of worker node `node` (e.g. inference@host) in `probe_dir`."""
    return probe_dir / f"{re.sub(r'[^A-Za-z0-9_.@-]+', '-', node)}.json"


def worker_state(node: str, task_pool: Any) -> dict[str, Any]:
    """What the probe needs, read in the main process: the model's load and its children's warm-up
    (`task_pool`: the consumer's Celery pool, whose public info lists a prefork pool's children)."""
    ctx = current()
    prefork = isinstance(task_pool, PreforkTaskPool)
    pids = [pid for pid in ((task_pool.info or {}).get("processes") or []) if pid] if prefork else []
    warm = [pid for pid in pids if ctx.slots.compute_threads(ctx.slots.slot_of(pid)) > 0]
    model_error = ctx.model.error
    if prefork:
        ready, reason = bool(warm) and model_error is None, ""
        if not ready:
            reason = f"the model failed to load: {model_error}" if model_error else "no child has warmed up yet"
    else:  # solo or threads pool: the model is this process'
        ready = ctx.model.served is not None and model_error is None
        reason = "" if ready else f"the model is not loaded ({model_error or 'loading'})"
    return {
        "node": node, "pid": os.getpid(), "beat": time.time(), "ready": ready, "reason": reason,
        "children": len(pids), "children_warm": len(warm),
    }  # fmt: skip


def write_state(path: Path, state: dict[str, Any]) -> None:
    """Replace the file whole (a probe never reads half of one)."""
    staging = path.with_name(f".{path.name}.{os.getpid()}")
    staging.write_text(json.dumps(state))
    staging.replace(path)


class WriteProbeState(bootsteps.StartStopStep):
    """Consumer step: rewrite this worker's probe state every BEAT_S on the main process' event loop."""

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        self.path: Path | None = None
        self.timer_entry: Any = None

    def start(self, parent: Any) -> None:
        self.path = state_file(parent.app.settings.probe_dir_path, parent.hostname)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            logger.warning("probe: cannot write %s (%s): `inference-tasks probe` will fail", self.path, error)
            return
        self.beat(parent)
        self.timer_entry = parent.timer.call_repeatedly(BEAT_S, self.beat, (parent,))

    def beat(self, parent: Any) -> None:
        if self.path is None:
            return
        try:
            write_state(self.path, worker_state(parent.hostname, parent.pool))
        except Exception as error:  # noqa: BLE001 - a probe file must never stop the worker
            logger.warning("probe: could not write %s: %s", self.path, error)

    def stop(self, parent: Any) -> None:
        """The consumer stops to reconnect (or before shutdown): not ready, alive for RECONNECT_GRACE_S."""
        self._cancel()
        if self.path is not None:
            state = {**worker_state(parent.hostname, parent.pool), "ready": False}
            state["reason"] = "the consumer is reconnecting to Redis"
            try:
                write_state(self.path, {**state, "quiet_until": time.time() + RECONNECT_GRACE_S})
            except OSError as error:
                logger.warning("probe: could not write %s: %s", self.path, error)

    def shutdown(self, parent: Any) -> None:
        """A worker shutting down is neither ready nor alive: its file goes, so the probe says so at once."""
        self._cancel()
        if self.path is not None:
            self.path.unlink(missing_ok=True)

    def _cancel(self) -> None:
        if self.timer_entry is not None:
            self.timer_entry.cancel()
            self.timer_entry = None
