"""Loading a dense encoder on CTranslate2: the int8 export of the served model, checked but not loaded
(each child loads it after the fork)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from inference_tasks.worker.runtimes.model_files import resolve_model_path

if TYPE_CHECKING:
    from pathlib import Path

    from inference_tasks.worker.runtimes.capabilities import DenseEncoder
    from inference_tasks.worker.runtimes.load_options import LoadOptions

# What the worker's main process imports for this runtime (tokenizers: runtimes/json_tokenizer.py).
IMPORTS = ("ctranslate2", "tokenizers")


def start_problem(source: str, options: LoadOptions) -> str | None:
    """What stops a worker: CTranslate2 not installed, or no export (the message names the command)."""
    from inference_tasks.worker.runtimes.ctranslate2.export_paths import (
        is_exported,
        missing_export_message,
        runtime_missing,
    )

    if problem := runtime_missing():
        return f"INFERENCE_BACKEND=ctranslate2 but {problem}"
    try:
        path = served_export(source, options)
    except ValueError as error:
        return str(error)
    return None if is_exported(path) else missing_export_message(source, path)


def load_dense_encoder(source: str, device: str, options: LoadOptions) -> DenseEncoder:
    from inference_tasks.worker.runtimes.ctranslate2.ct2_encoder import Ct2Encoder

    return Ct2Encoder(source, served_export(source, options))


def served_export(source: str, options: LoadOptions) -> Path:
    """The export directory a worker reads; ValueError without a model cache."""
    from inference_tasks.worker.runtimes.ctranslate2.export_paths import export_path

    if options.cache is None:
        raise ValueError("the CTranslate2 backend needs the model cache directory (INFERENCE_MODEL_CACHE)")
    return export_path(source, resolve_model_path(source), options.cache)
