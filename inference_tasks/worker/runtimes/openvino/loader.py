"""Loading a dense encoder on OpenVINO: the export of the served model, in the precision measured fastest
on this host (or the one INFERENCE_OPENVINO_PRECISION names), read but never compiled (safe before a fork)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from inference_tasks.worker.runtimes.model_files import resolve_model_path

if TYPE_CHECKING:
    from pathlib import Path

    from inference_tasks.worker.runtimes.capabilities import DenseEncoder
    from inference_tasks.worker.runtimes.load_options import LoadOptions
    from inference_tasks.worker.runtimes.openvino.precision_choice import PrecisionChoice

logger = logging.getLogger(__name__)

# What the worker's main process imports for this runtime (tokenizers: runtimes/json_tokenizer.py).
IMPORTS = ("openvino", "tokenizers")


def start_problem(source: str, options: LoadOptions) -> str | None:
    """What stops a worker (worker/lifecycle/start_checks.py): OpenVINO not installed, or the export of
    the precision it would serve missing (the message names the export command); a stale int8 export
    is served with a warning (doctor fails on it)."""
    from inference_tasks.worker.runtimes.openvino.export_paths import (
        is_exported,
        missing_export_message,
        runtime_missing,
    )
    from inference_tasks.worker.runtimes.openvino.precision_choice import STALE_EXPORT

    try:
        choice, path = served_export(source, options)
    except ValueError as error:
        return str(error)
    if choice.how == STALE_EXPORT:
        logger.warning("openvino precision: serving %s, %s", choice.precision, choice.why)
    return runtime_missing() or (None if is_exported(path) else missing_export_message(source, path, choice.precision))


def load_dense_encoder(source: str, device: str, options: LoadOptions) -> DenseEncoder:
    from inference_tasks.worker.runtimes.openvino.openvino_encoder import OpenVinoEncoder

    choice, path = served_export(source, options)
    encoder = OpenVinoEncoder(source, path, choice.precision, options.shape_buckets)
    encoder.precision_choice = choice.as_dict()
    return encoder


def served_export(source: str, options: LoadOptions) -> tuple[PrecisionChoice, Path]:
    """The precision this host serves `source` in (measured, or as INFERENCE_OPENVINO_PRECISION says) and
    the export directory that holds it; ValueError without a model cache."""
    from inference_tasks.worker.runtimes.openvino.export_paths import served_export_path
    from inference_tasks.worker.runtimes.openvino.precision_choice import served_precision

    if options.cache is None:
        raise ValueError("the OpenVINO backend needs the model cache directory (INFERENCE_MODEL_CACHE)")
    files = resolve_model_path(source)
    choice = served_precision(options.precision, source, files, options.cache)
    return choice, served_export_path(source, files, options.cache, choice.precision)
