"""Where the OpenVINO export of a model lives in the model cache, and whether it is complete: read by
workers (loader.py), `export-model` (export.py) and `doctor`; no OpenVINO import."""

from __future__ import annotations

from pathlib import Path

from inference_tasks.worker.runtimes.export_files import MANIFEST_FILE, model_export_path, read_manifest
from inference_tasks.worker.runtimes.model_files import WEIGHT_FILES

IR_FILE = "openvino/openvino_model.xml"
# Files of a model directory the export leaves out: the framework weights (the IR carries its own).
FRAMEWORK_WEIGHTS = WEIGHT_FILES


def export_path(model: str, source: Path, cache: Path) -> Path:
    """Where the OpenVINO export of `model` (read from `source`) lives under the model cache."""
    return model_export_path("openvino", model, source, cache)


# INFERENCE_OPENVINO_PRECISION=int8 serves a second export beside the first: the same IR quantized
# by NNCF (export.py), in the directory of the full-precision export plus this suffix.
INT8 = "int8"
INT8_SUFFIX = "-int8"


def int8_export_path(model: str, source: Path, cache: Path) -> Path:
    base = export_path(model, source, cache)
    return base.with_name(base.name + INT8_SUFFIX)


def served_export_path(model: str, source: Path, cache: Path, precision: str) -> Path:
    """The export a worker with INFERENCE_OPENVINO_PRECISION=`precision` reads."""
    return int8_export_path(model, source, cache) if precision == INT8 else export_path(model, source, cache)


def is_exported(path: Path) -> bool:
    """Complete exports only: the manifest is written last, after the IR."""
    return (path / IR_FILE).is_file() and (path / MANIFEST_FILE).is_file()


def quantized_by(path: Path) -> str | None:
    """The int8 recipe's digest an export's manifest records (int8_recipe.py); None when it records
    none (a full-precision export, or an int8 one from before recipes were recorded)."""
    recipe = read_manifest(path).get("calibration", {}).get("recipe")
    return recipe if isinstance(recipe, str) else None


INSTALL_HINT = "pip install 'inference-tasks[openvino]' (scripts/setup.sh installs it, from the lock)"


def runtime_missing() -> str | None:
    """Why OpenVINO cannot run in this environment (its package is an extra), or None."""
    try:
        import openvino  # noqa: F401
    except ImportError as error:
        return f"INFERENCE_BACKEND=openvino but OpenVINO is not installed ({error}): {INSTALL_HINT}"
    return None


def missing_export_message(model: str, path: Path, precision: str = "auto") -> str:
    if precision == INT8:
        return (
            f"INFERENCE_OPENVINO_PRECISION=int8 but {model!r} has no int8 export at {path}: run "
            "`inference-tasks export-model --backend openvino --precision int8` once (offline, ~30 s) with the "
            "same INFERENCE_MODEL and INFERENCE_MODEL_CACHE"
        )
    return (
        f"INFERENCE_BACKEND=openvino but {model!r} has no OpenVINO export at {path}: run "
        "`inference-tasks export-model --backend openvino` once (offline, ~10 s) with the same INFERENCE_MODEL "
        "and INFERENCE_MODEL_CACHE, or `INFERENCE_BACKEND=openvino bash scripts/setup.sh`"
    )
