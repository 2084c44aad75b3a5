"""What stops a worker before it serves, saying why: a model it cannot serve (a bad catalogue, another
model's queue), a missing OpenVINO export, a memory limit below what a loaded child needs.

Celery swallows exceptions raised in signal handlers; SystemExit passes through its dispatch, so
RefusedToStart stops the worker before it consumes anything.
"""

from __future__ import annotations

import logging
import os
import resource
import signal
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from inference_tasks.config import Settings

logger = logging.getLogger(__name__)


class RefusedToStart(SystemExit):
    """The worker stops before consuming anything, saying why (INFERENCE_BACKEND=openvino without
    OpenVINO or without the export: the message names the command to run)."""


def refuse_to_start_without_a_model(settings: Settings, consumed: list[str]) -> None:
    """Stop the worker before it consumes anything if INFERENCE_MODELS_FILE or INFERENCE_MODEL cannot be
    used (the message names the file, the model and the field), or if it was told to consume another
    model's queue (`-Q inference.e5` on a worker serving minilm): a task must never be answered by a
    model it did not ask for. Else say which model it serves, on which queues."""
    from inference_tasks.config.catalogue import model_of_queue
    from inference_tasks.config.checks import ConfigError
    from inference_tasks.hub import not_pulled_message, parse_reference

    try:
        catalogue, entry = settings.models
    except ConfigError as error:
        logger.critical("%s", error)
        raise RefusedToStart(str(error)) from None
    own = catalogue.queues_of(entry.alias)
    foreign = [queue for queue in consumed if model_of_queue(queue, catalogue) not in (None, entry.alias)]
    if foreign:
        theirs = ", ".join(f"{queue} (model {model_of_queue(queue, catalogue)!r})" for queue in foreign)
        message = (
            f"this worker serves model {entry.alias!r} (its queues: {', '.join(own)}) but was told to consume "
            f"{theirs}: start one worker per model (`inference-tasks worker --model <alias>`, or "
            "INFERENCE_MODEL=<alias>)"
        )
        logger.critical(message)
        raise RefusedToStart(message)
    if parse_reference(entry.source) is not None:
        from inference_tasks.worker.runtimes.model_files import resolve_model_path

        try:
            resolve_model_path(entry.source)
        except FileNotFoundError:
            message = not_pulled_message(entry.source, entry.alias)
            logger.critical(message)
            raise RefusedToStart(message) from None
    logger.warning("serving model %r (%s) on queue(s) %s", entry.alias, entry.source, ", ".join(own))


def refuse_to_start_without_the_export(settings: Settings) -> None:
    """Stop the worker before it consumes anything if the OpenVINO export is missing (and warn when its
    int8 export was quantized by another release's recipe: served, but doctor fails on it).

    Exporting here instead would trace the model with a torch forward pass in the process that
    forks the children (libgomp), and would repeat a deploy step on every start; a worker that
    started anyway would fail every task. SystemExit passes through Celery's signal dispatch.
    """
    from inference_tasks.worker.runtimes.model_files import resolve_model_path
    from inference_tasks.worker.runtimes.openvino.export_paths import (
        is_exported,
        missing_export_message,
        runtime_missing,
        served_export_path,
    )
    from inference_tasks.worker.runtimes.openvino.precision_choice import STALE_EXPORT, served_precision

    source = settings.served_model.source
    files = resolve_model_path(source)
    choice = served_precision(settings.openvino_precision, source, files, settings.model_cache_dir)
    if choice.how == STALE_EXPORT:
        logger.warning("openvino precision: serving %s, %s", choice.precision, choice.why)
    precision = choice.precision
    path = served_export_path(source, files, settings.model_cache_dir, precision)
    message = runtime_missing() or (None if is_exported(path) else missing_export_message(source, path, precision))
    if message:
        logger.critical(message)
        raise RefusedToStart(message)


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
