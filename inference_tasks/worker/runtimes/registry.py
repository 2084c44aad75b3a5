"""Runtimes by name: each one a folder under worker/runtimes/ whose `loader` module says what it imports
in a worker's main process and loads a dense encoder. A new runtime is a folder plus one line here
(and its name in config/defaults.RUNTIMES, which the catalogue checks producer-side).

Loader modules are imported by name, on first use: a worker that serves torch never imports OpenVINO.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING

from inference_tasks.config.defaults import AUTO_RUNTIME, MODEL2VEC_RUNTIME, NUMPY_RUNTIME

if TYPE_CHECKING:
    from inference_tasks.config import Settings
    from inference_tasks.worker.runtimes.capabilities import DenseEncoder
    from inference_tasks.worker.runtimes.load_options import LoadOptions

# Runtime name (a catalogue entry's backend, INFERENCE_BACKEND) -> the module that loads models on it.
RUNTIME_LOADERS = {
    "torch": "inference_tasks.worker.runtimes.torch.loader",
    "openvino": "inference_tasks.worker.runtimes.openvino.loader",
    "ctranslate2": "inference_tasks.worker.runtimes.ctranslate2.loader",
    AUTO_RUNTIME: "inference_tasks.worker.runtimes.auto.loader",
    NUMPY_RUNTIME: "inference_tasks.worker.runtimes.numpy.loader",
    MODEL2VEC_RUNTIME: "inference_tasks.worker.runtimes.model2vec.loader",
}
# What the trainer imports in its main process, whatever the runtime: it fine-tunes with sentence-transformers.
TRAINING_IMPORTS = ("torch", "sentence_transformers")


def runtime_loader(runtime: str) -> ModuleType:
    """The loader module of `runtime` (KeyError for a name no folder holds: the catalogue refuses it first)."""
    return importlib.import_module(RUNTIME_LOADERS[runtime])


def import_runtime(source: str, options: LoadOptions, for_training: bool = False) -> None:
    """Import what the runtime `options` name uses for `source`, and nothing else (the worker's main
    process: loaded once there, shared by fork; docs/benchmarks-log.md, "Cold start per runtime"): its
    loader's `imports(source, options)` where what it runs depends on a record (auto), else its IMPORTS;
    the trainer's libraries for a trainer."""
    loader = runtime_loader(options.runtime)
    if for_training:
        names: tuple[str, ...] = TRAINING_IMPORTS
    else:
        names = loader.imports(source, options) if hasattr(loader, "imports") else loader.IMPORTS
    for name in names:
        importlib.import_module(name)


def prepare_runtime(settings: Settings, runtime: str) -> None:
    """What `runtime` does once at a worker's start, in its main process, before the start checks (its
    loader's `prepare`: the auto runtime exports and measures a model this host has not measured)."""
    prepare = getattr(runtime_loader(runtime), "prepare", None)
    if prepare is not None:
        prepare(settings)


def start_problem(source: str, options: LoadOptions) -> str | None:
    """Why the runtime `options` name cannot serve `source` here, naming the command that mends it (the
    loader's `start_problem`, for a runtime that needs a deploy step), or None."""
    check = getattr(runtime_loader(options.runtime), "start_problem", None)
    return check(source, options) if check is not None else None


def load_dense_encoder(source: str, device: str, options: LoadOptions) -> DenseEncoder:
    """The dense encoder `source` names, on the runtime `options` name, loaded but never run (safe before a fork)."""
    encoder: DenseEncoder = runtime_loader(options.runtime).load_dense_encoder(source, device, options)
    return encoder
