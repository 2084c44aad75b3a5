"""Where the CTranslate2 export of a model lives in the model cache and whether it is complete: read by
workers (loader.py), `export-model` (export.py) and the auto runtime; no CTranslate2 import."""

from __future__ import annotations

from pathlib import Path

from inference_tasks.worker.runtimes.export_files import MANIFEST_FILE, model_export_path

RUNTIME = "ctranslate2"
# The converted network inside an export (model.bin, config.json, vocabulary), beside the model's
# tokenizer and sentence-transformers configs, which pipeline_encoder.py reads.
MODEL_DIR = "ctranslate2"
MODEL_FILE = f"{MODEL_DIR}/model.bin"
# Weights stored int8 and products computed in int8 (activations quantized per row at run time):
# the fastest type on a CPU without bf16 matrix units, within the accuracy gate (docs/benchmarks.md).
COMPUTE_TYPE = "int8"
INSTALL_HINT = "pip install 'inference-tasks[ctranslate2]' (scripts/setup.sh installs it, from the lock)"


def export_path(model: str, source: Path, cache: Path) -> Path:
    return model_export_path(RUNTIME, model, source, cache)


def is_exported(path: Path) -> bool:
    """Complete exports only: the manifest is written last, after the converted model."""
    return (path / MODEL_FILE).is_file() and (path / MANIFEST_FILE).is_file()


def runtime_missing() -> str | None:
    """Why CTranslate2 cannot run in this environment (its package is an extra), or None."""
    try:
        import ctranslate2  # noqa: F401
    except ImportError as error:
        return f"CTranslate2 is not installed ({error}): {INSTALL_HINT}"
    return None


def missing_export_message(model: str, path: Path) -> str:
    return (
        f"INFERENCE_BACKEND=ctranslate2 but {model!r} has no CTranslate2 export at {path}: run "
        "`inference-tasks export-model --backend ctranslate2` once (offline, ~10 s) with the same INFERENCE_MODEL "
        "and INFERENCE_MODEL_CACHE"
    )
