"""What stops a worker before it serves, saying why: a model it cannot serve (a bad catalogue, another
model's queue), what its runtime lacks (an OpenVINO export, a distilled static model), a memory limit
below what a loaded child needs.

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
    OpenVINO or without the export, a static model not distilled: the message names the command to run)."""


def refuse_to_start_without_a_model(settings: Settings, consumed: list[str]) -> None:
    """Stop the worker before it consumes anything if INFERENCE_MODELS_FILE or INFERENCE_MODEL cannot be
    used (the message names the file, the model and the field), or if it was told to consume another
    model's queue (`-Q inference.e5` on a worker serving minilm): a task must never be answered by a
    model it did not ask for. Else say which model it serves, on which queues."""
    from inference_tasks.config.catalogue import model_of_queue
    from inference_tasks.config.checks import ConfigError
    from inference_tasks.hub import not_pulled_message, parse_reference
    from inference_tasks.worker.runtimes.model_files import model_name

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
    logger.warning("serving model %r (%s) on queue(s) %s", entry.alias, model_name(entry.source), ", ".join(own))


def refuse_to_start_without_the_runtime(settings: Settings) -> None:
    """Stop the worker before it consumes anything if its runtime cannot serve the model here: the
    runtime's own start check (its loader's `start_problem`: OpenVINO without its package or the
    export, a static model never distilled or distilled by another model2vec), whose message names
    the command to run.

    Making what is missing here instead would run a deploy step (a torch forward pass for an export or
    a distillation) in the process that forks the children (libgomp), on every start; a worker that
    started anyway would fail every task. SystemExit passes through Celery's signal dispatch.
    """
    from inference_tasks.worker.runtimes.load_options import LoadOptions
    from inference_tasks.worker.runtimes.registry import start_problem

    message = start_problem(settings.served_model.source, LoadOptions.of(settings))
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
