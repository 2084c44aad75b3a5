"""`inference-tasks distil-model ALIAS`: a static model distilled from a catalogue model with model2vec, once,
offline, at deploy time, into the model cache, where a catalogue entry of kind "static" points.

model2vec passes every token of the teacher's vocabulary through the teacher once (a torch forward pass:
never in a worker, whose main process forks), reduces the vectors with PCA and weights them (SIF),
~15 s for all-MiniLM-L6-v2 on 2 cores. Written beside its final place and renamed into it, manifest
last, so a crash never leaves a directory a worker would serve; an existing distillation of the same
teacher files, dimensions and model2vec series is kept (`force` redoes it).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from inference_tasks.worker.runtimes.model2vec.manifest import (
    MANIFEST_FILE,
    model2vec_version,
    read_manifest,
    same_series,
)
from inference_tasks.worker.runtimes.model_files import resolve_model_path, source_fingerprint

if TYPE_CHECKING:
    from inference_tasks.config import Settings
    from inference_tasks.config.catalogue import ModelEntry

# PCA dimensions when none are asked for: model2vec's own default, and the size its figures are for.
DEFAULT_PCA_DIMS = 256
# Where a static model's vectors live: its own space, or its teacher's (bridge.py, `--space teacher`).
STATIC_SPACE = "static"
TEACHER_SPACE = "teacher"
SPACES = (STATIC_SPACE, TEACHER_SPACE)


@dataclass(frozen=True)
class Distillation:
    path: Path
    created: bool
    seconds: float


def static_model_path(settings: Settings, name: str) -> Path:
    """Where static model `name` lives under the model cache (INFERENCE_MODEL_CACHE)."""
    return settings.model_cache_dir / "static" / re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-")


def distil(
    settings: Settings, teacher: ModelEntry, pca_dims: int | None, name: str | None, force: bool
) -> Distillation:
    """The static model distilled from catalogue entry `teacher` (a dense embedding model the caller checked)."""
    from inference_tasks.worker.host.threads import set_offline_env

    files = resolve_model_path(teacher.source)
    dims = pca_dims or DEFAULT_PCA_DIMS
    name = name or f"{teacher.alias}-static-{dims}"
    target = static_model_path(settings, name)
    identity = teacher_identity(teacher)
    existing = read_manifest(target)
    if existing is not None and not force and same_distillation(existing, identity, dims):
        return Distillation(target, False, 0.0)
    set_offline_env(os.environ)  # the teacher and its tokenizer are local; nothing is downloaded
    started = time.perf_counter()
    from model2vec.distill import distill as model2vec_distill

    model = model2vec_distill(model_name=str(files), pca_dims=dims)
    write_model(target, model, manifest_of(name, identity, model, dims, STATIC_SPACE), started)
    return Distillation(target, True, time.perf_counter() - started)


def manifest_of(name: str, identity: dict[str, str], model: Any, pca_dims: int, space: str) -> dict[str, Any]:
    """What every static model's manifest holds (distilled_at and seconds are added as it is written)."""
    return {
        "name": name,
        "teacher": identity,
        "model2vec": model2vec_version(),
        "dims": int(model.dim),
        "pca_dims": pca_dims,
        "vocabulary": len(model.tokens),
        "space": space,
    }


def teacher_identity(teacher: ModelEntry) -> dict[str, str]:
    files = resolve_model_path(teacher.source)
    return {"alias": teacher.alias, "source": teacher.source, "fingerprint": source_fingerprint(files)}


def write_model(target: Path, model: Any, manifest: dict[str, Any], started: float) -> None:
    """`model` saved beside `target` and renamed into it, manifest last (a crash leaves no servable half)."""
    staging = target.with_name(f"{target.name}.tmp-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        model.save_pretrained(staging)
        manifest = manifest | {"distilled_at": time.time(), "seconds": round(time.perf_counter() - started, 2)}
        (staging / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n")
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def same_distillation(manifest: dict[str, Any], identity: dict[str, str], dims: int) -> bool:
    return (
        manifest.get("teacher") == identity and manifest.get("pca_dims") == dims
        and manifest.get("space", STATIC_SPACE) == STATIC_SPACE
        and same_series(str(manifest.get("model2vec", "")), model2vec_version())
    )  # fmt: skip
