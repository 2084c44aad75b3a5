"""Loading a static model on model2vec's runtime: a directory `distil-model` wrote, or a pulled hub snapshot."""

from __future__ import annotations

from typing import TYPE_CHECKING

from inference_tasks.worker.runtimes.model_files import resolve_model_path

if TYPE_CHECKING:
    from inference_tasks.worker.runtimes.capabilities import DenseEncoder
    from inference_tasks.worker.runtimes.load_options import LoadOptions

# What the worker's main process imports for this runtime: model2vec's inference (numpy, tokenizers,
# safetensors; not torch, not transformers).
IMPORTS = ("model2vec", "tokenizers")


def load_dense_encoder(source: str, device: str, options: LoadOptions) -> DenseEncoder:
    from inference_tasks.worker.runtimes.model2vec.static_encoder import StaticEncoder

    return StaticEncoder(source, resolve_model_path(source), device)


def start_problem(source: str, options: LoadOptions) -> str | None:
    """What stops a worker (worker/lifecycle/start_checks.py): model2vec not installed, the directory
    missing or not a static model, or distilled by another model2vec series (the message names the
    distil-model command)."""
    from inference_tasks.worker.runtimes.model2vec.manifest import DISTIL_COMMAND, StaticModelError, check_manifest

    try:
        import model2vec  # noqa: F401
    except ImportError as error:
        return f"a static model needs model2vec ({error}): pip install 'inference-tasks[static]'"
    try:
        check_manifest(resolve_model_path(source))
    except FileNotFoundError:
        return (
            f"static model {source!r} not found: run `{DISTIL_COMMAND} <alias>` and point the entry's source at "
            "the directory it prints"
        )
    except StaticModelError as error:
        return str(error)
    return None
