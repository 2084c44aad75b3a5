"""`inference-tasks distil-model ALIAS --space teacher`: the static model of ALIAS (distilled first, or the
one already in the cache) with the bridge of bridge.py multiplied into its table, written as a static
model of its own whose vectors are the teacher's width and sit in the teacher's space.

The teacher encodes the fit texts here, in the command's process (a torch forward pass: never in a worker,
whose main process forks). A bridged model of the same teacher, dimensions, model2vec series and fit
texts is kept (`force` redoes it, the static distillation under it included).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from inference_tasks.worker.runtimes.model2vec.bridge import bridged_model, fit_bridge, fit_texts, texts_digest
from inference_tasks.worker.runtimes.model2vec.distillation import (
    DEFAULT_PCA_DIMS,
    TEACHER_SPACE,
    Distillation,
    distil,
    manifest_of,
    static_model_path,
    teacher_identity,
    write_model,
)
from inference_tasks.worker.runtimes.model2vec.manifest import model2vec_version, read_manifest, same_series

if TYPE_CHECKING:
    from inference_tasks.config import Settings
    from inference_tasks.config.catalogue import ModelEntry


def distil_in_teacher_space(
    settings: Settings, teacher: ModelEntry, pca_dims: int | None, name: str | None, force: bool,
    fit_path: Path | None,
) -> Distillation:  # fmt: skip
    """The bridged static model of `teacher`, fitted on the lines of `fit_path` (default: sentences of the
    packaged calibration corpus's words); FitTextsError names --fit-texts when the file cannot serve."""
    texts, origin = fit_texts(fit_path)
    dims = pca_dims or DEFAULT_PCA_DIMS
    name = name or f"{teacher.alias}-static-{dims}-{TEACHER_SPACE}"
    target = static_model_path(settings, name)
    identity = teacher_identity(teacher)
    prompt = teacher.prompts.get(teacher.default_prompt, "") if teacher.default_prompt else ""
    texts = [prompt + text for text in texts]
    existing = read_manifest(target)
    started = time.perf_counter()
    base = distil(settings, teacher, pca_dims, None, force)
    if existing is not None and not force and not base.created and _same_bridge(existing, identity, dims, texts):
        return Distillation(target, False, 0.0)
    from model2vec import StaticModel

    from inference_tasks.worker.host.threads import set_offline_env
    from inference_tasks.worker.runtimes.load_options import LoadOptions
    from inference_tasks.worker.runtimes.model2vec.static_encoder import StaticEncoder
    from inference_tasks.worker.runtimes.registry import load_dense_encoder

    set_offline_env(os.environ)  # the teacher is local; nothing is downloaded
    teacher_encoder = load_dense_encoder(teacher.source, "cpu", LoadOptions(cache=settings.model_cache_dir))
    static = StaticEncoder(str(base.path), base.path, "cpu")
    bridge = fit_bridge(static, teacher_encoder, texts, origin)
    model = bridged_model(StaticModel.from_pretrained(base.path), bridge)
    manifest = manifest_of(name, identity, model, dims, TEACHER_SPACE)
    manifest |= {"bridge": bridge.record(), "bridged_from": str(base.path)}
    write_model(target, model, manifest, started)
    return Distillation(target, True, time.perf_counter() - started)


def _same_bridge(manifest: dict[str, Any], identity: dict[str, str], dims: int, texts: list[str]) -> bool:
    digest = texts_digest(texts)
    return (
        manifest.get("teacher") == identity and manifest.get("pca_dims") == dims
        and manifest.get("space") == TEACHER_SPACE and manifest.get("bridge", {}).get("digest") == digest
        and same_series(str(manifest.get("model2vec", "")), model2vec_version())
    )  # fmt: skip
