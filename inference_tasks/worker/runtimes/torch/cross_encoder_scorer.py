"""A cross-encoder (catalogue kind "cross-encoder"): sentence-transformers' CrossEncoder loaded from a local
directory, run by torch, scoring (query, document) pairs for inference.rerank.

A cross-encoder reads the query and a document together, so it ranks better than comparing two
separately computed vectors, at the price of one forward pass per pair. It serves rerank only; the
other tasks fail with the reason. Loaded like an embedding model (in the main process, never run
there; warmed up in each child), with sentence-transformers' own activation (a sigmoid for a
one-label model such as ms-marco-MiniLM-L-6-v2), so scores equal CrossEncoder.predict's.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from inference_tasks.worker.runtimes.torch.torch_model_facts import TorchModelFacts, float32_weights

if TYPE_CHECKING:
    import numpy as np


class CrossEncoderScorer(TorchModelFacts):
    """A cross-encoder run by torch: a PairScorer (capabilities.py)."""

    def __init__(self, name: str, path: Path, device: str) -> None:
        from sentence_transformers import CrossEncoder

        super().__init__(name, device)  # pairs go in passes of batch_size (no token bound)
        self.dim = 0  # no vectors
        self._model = CrossEncoder(str(path), device=device, local_files_only=True, model_kwargs=float32_weights())
        if self._model.num_labels != 1:
            raise ValueError(
                f"{path} is a cross-encoder with {self._model.num_labels} labels; reranking needs one relevance score"
            )

    def score_pairs(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        scores = self._model.predict(
            list(pairs),
            batch_size=self.batch_size,
            show_progress_bar=False,
            convert_to_numpy=True,
        )
        return scores if scores.dtype.name == "float32" else scores.astype("float32")

    @property
    def max_tokens(self) -> int | None:
        return int(self._model.max_length) if self._model.max_length else None

    def pair_token_counts(self, query: str, documents: Sequence[str]) -> list[int]:
        """Word pieces of each (query, document) pair as the model reads it, before truncation."""
        encoded = self._model.tokenizer(
            [query.strip()] * len(documents), [document.strip() for document in documents],
            truncation=False, return_attention_mask=False, return_token_type_ids=False, verbose=False,
        )  # fmt: skip
        return [len(ids) for ids in encoded["input_ids"]]

    def limit_length(self, tokens: int) -> None:
        self._model.max_length = tokens
