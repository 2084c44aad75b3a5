"""A worker with INFERENCE_BACKEND=auto that finds no measurement for this host makes it at its first
start: `export-model --backend auto` in a subprocess of the worker's main process, once per host kind
and model, under a file lock, before any child is forked.

A subprocess, because exporting and measuring run torch forward passes, which must never run in a
process that forks afterwards (libgomp). A lock, because every worker of a host starts at once:
the first exports, the others wait and then read its record. What fails leaves a note beside the
record (`<record>.failed`) that the loader shows as the reason it serves torch.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from inference_tasks.config import Settings

logger = logging.getLogger(__name__)

# Export and measurement took ~25 s on a 2-core host (docs/benchmarks.md); a hung one must not hold
# the worker forever: it serves torch instead.
EXPORT_TIMEOUT_S = 900
FAILED_SUFFIX = ".failed"


def failure_note(record: Path) -> Path:
    return record.with_name(record.name + FAILED_SUFFIX)


def prepare(settings: Settings) -> None:
    """Make this host's measurement of the served model unless it is recorded and usable."""
    from inference_tasks.worker.runtimes.auto.choice_record import read_record, record_dir, record_path
    from inference_tasks.worker.runtimes.auto.routes import unusable
    from inference_tasks.worker.runtimes.model_files import resolve_model_path
    from inference_tasks.worker.runtimes.openvino.precision_choice import host_cpu

    model, cache = settings.served_model.source, settings.model_cache_dir
    source, cpu = resolve_model_path(model), host_cpu()
    directory = record_dir(model, source, cache)
    record = read_record(directory, cpu)
    if record is not None and unusable(record, model, source, cache) is None:
        return
    try:
        directory.mkdir(parents=True, exist_ok=True)
        lock_file = open(directory.with_name(directory.name + ".lock"), "a")  # noqa: SIM115 - held while exporting
    except OSError as error:
        logger.warning("auto runtime: cannot write the model cache %s (%s): serving torch", cache, error)
        return
    with lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        record = read_record(directory, cpu)
        if record is not None and unusable(record, model, source, cache) is None:
            logger.warning("auto runtime: %s was measured by another worker while this one waited", model)
            return
        export(settings, record_path(directory, cpu), force=record is not None)


def export_env() -> dict[str, str]:
    """This process's environment without its one-thread pins: converting uses every core (the measurement
    pins each candidate to one thread itself, as a child runs it)."""
    from inference_tasks.worker.host.threads import THREAD_ENV_VARS

    return {name: value for name, value in os.environ.items() if name not in THREAD_ENV_VARS}


def export(settings: Settings, record: Path, force: bool) -> None:
    """Run `export-model --backend auto` for the served model; log its duration, or why it failed."""
    alias = settings.served_model.alias
    command = [sys.executable, "-m", "inference_tasks.ops.cli", "export-model", "--backend", "auto", "--model", alias]
    logger.warning(
        "auto runtime: no usable measurement of %r on this host's CPU: exporting and measuring it once "
        "(`inference-tasks export-model`, under a lock; the other workers wait)", alias,
    )  # fmt: skip
    started = time.perf_counter()
    note = failure_note(record)
    try:
        done = subprocess.run(
            [*command, *(["--force"] if force else [])], env=export_env(), capture_output=True, text=True,
            timeout=EXPORT_TIMEOUT_S, check=False,
        )  # fmt: skip
        problem = None if done.returncode == 0 else (done.stderr.strip().splitlines() or ["no output"])[-1]
    except (OSError, subprocess.TimeoutExpired) as error:
        problem = str(error)
    took = time.perf_counter() - started
    if problem is None:
        note.unlink(missing_ok=True)
        logger.warning("auto runtime: %r exported and measured in %.1f s", alias, took)
        return
    why = f"the first-start export (`{' '.join(command[2:])}`) failed after {took:.1f} s: {problem}"
    logger.warning("auto runtime: %s; serving torch", why)
    with contextlib.suppress(OSError):
        note.write_text(why + "\n")
