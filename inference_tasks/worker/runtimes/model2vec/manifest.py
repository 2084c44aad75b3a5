"""What `distil-model` records beside a static model, and the check a worker makes of it before serving:
the directory holds a model2vec model, distilled by a model2vec this release can read."""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path
from typing import Any

# Written last by distil-model (a directory without it is not a finished distillation of ours).
MANIFEST_FILE = "inference_tasks_static.json"
# What a model2vec model directory holds (model2vec's own layout).
MODEL_FILES = ("model.safetensors", "tokenizer.json", "config.json")
DISTIL_COMMAND = "inference-tasks distil-model"


class StaticModelError(ValueError):
    """A static model that cannot be served here; the message names the command that mends it."""


def model2vec_version() -> str:
    return metadata.version("model2vec")


def same_series(one: str, other: str) -> bool:
    """Two model2vec versions that read each other's files: the same major and minor version."""
    return one.split(".")[:2] == other.split(".")[:2]


def read_manifest(path: Path) -> dict[str, Any] | None:
    manifest = path / MANIFEST_FILE
    return json.loads(manifest.read_text()) if manifest.is_file() else None


def check_manifest(path: Path) -> dict[str, Any]:
    """The manifest of the static model at `path` ({} for one from the hub, pulled: it carries none and is
    read as model2vec reads it); StaticModelError unless `path` holds a model2vec model this release
    reads: its files, and a manifest written by the same model2vec series."""
    missing = [name for name in MODEL_FILES if not (path / name).is_file()]
    if missing:
        raise StaticModelError(
            f"{path} is not a static model (missing {', '.join(missing)}): run `{DISTIL_COMMAND} <alias>` and "
            "point the catalogue entry's source at the directory it prints"
        )
    manifest = read_manifest(path)
    if manifest is not None and not same_series(manifest.get("model2vec", ""), model2vec_version()):
        raise StaticModelError(
            f"{path} was distilled by model2vec {manifest.get('model2vec')}, this worker has {model2vec_version()}: "
            f"run `{DISTIL_COMMAND} {manifest.get('teacher', {}).get('alias', '<alias>')} --force` again"
        )
    return manifest or {}
