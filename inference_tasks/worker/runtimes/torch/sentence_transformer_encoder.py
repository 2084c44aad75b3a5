"""The sentence-transformers runtime on torch: a model directory loaded, encoded in token-bounded passes."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from inference_tasks.worker.runtimes import tokens
from inference_tasks.worker.runtimes.passes import encode_in_passes
from inference_tasks.worker.runtimes.torch.torch_model_facts import TorchModelFacts, float32_weights

if TYPE_CHECKING:
    import numpy as np


class SentenceTransformerEncoder(TorchModelFacts):
    """A sentence-transformers model loaded from a local directory, run by torch."""

    def __init__(self, name: str, path: Path, device: str) -> None:
        from sentence_transformers import SentenceTransformer

        super().__init__(name, device)
        self._model = SentenceTransformer(
            str(path), device=device, local_files_only=True, model_kwargs=float32_weights()
        )
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
