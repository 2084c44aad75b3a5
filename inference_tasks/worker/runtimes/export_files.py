"""How every runtime's offline export is laid out and written: one directory per model version under the
model cache, built beside its final place and renamed into it, its manifest written last.

Shared by `export-model` for each runtime (openvino/export.py, ctranslate2/export.py): a crash never
leaves a half export that a worker would load, and a new model version (weights or config) gets a
directory of its own (model_files.source_fingerprint).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from inference_tasks.worker.runtimes.model_files import source_fingerprint

if TYPE_CHECKING:
    from inference_tasks.config import Settings

# Written last: an export directory without it is incomplete.
MANIFEST_FILE = "inference_tasks_export.json"


class MissingExport(FileNotFoundError):
    """A runtime that needs an export was asked to load a model that has none (or an incomplete one)."""


@dataclass(frozen=True)
class Export:
    path: Path
    created: bool
    seconds: float


def model_export_path(runtime: str, model: str, source: Path, cache: Path) -> Path:
    """Where `runtime`'s export of `model` (read from `source`) lives under the model cache `cache`."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", Path(model).name).strip("-") or "model"
    return cache / runtime / f"{name}-{source_fingerprint(source)}"


def read_manifest(path: Path) -> dict[str, Any]:
    """The manifest of the export at `path` ({} when it has none)."""
    manifest = path / MANIFEST_FILE
    return json.loads(manifest.read_text()) if manifest.is_file() else {}


def write_export(
    target: Path, copy_from: Path, ignore: Callable[..., Any], make: Callable[[Path], dict[str, Any]]
) -> Export:  # fmt: skip
    """Build an export in a staging directory beside `target` (copy_from's files, then `make` writes the
    runtime's files and returns the manifest), then rename it into place."""
    started = time.perf_counter()
    staging = target.with_name(f"{target.name}.tmp-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(copy_from, staging, ignore=ignore)
    try:
        manifest = make(staging)
        manifest |= {"exported_at": time.time(), "seconds": round(time.perf_counter() - started, 2)}
        (staging / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n")
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return Export(target, True, time.perf_counter() - started)


def export_served_model(
    settings: Settings, place: Callable[[str, Path, Path], Path], complete: Callable[[Path], bool],
    make: Callable[[str, Path, Path], dict[str, Any]], ignore: Callable[..., Any], force: bool = False,
) -> Export:  # fmt: skip
    """The served model's export for one runtime: kept where `complete` (unless `force`), else written by
    `make(model, source, staging)` beside its `place(model, source, cache)`, offline (nothing downloads)."""
    from inference_tasks.worker.host.threads import set_offline_env
    from inference_tasks.worker.runtimes.model_files import resolve_model_path

    model = settings.served_model.source
    source = resolve_model_path(model)
    target = place(model, source, settings.model_cache_dir)
    if complete(target) and not force:
        return Export(target, False, 0.0)
    set_offline_env(os.environ)
    return write_export(target, source, ignore, lambda staging: make(model, source, staging))
