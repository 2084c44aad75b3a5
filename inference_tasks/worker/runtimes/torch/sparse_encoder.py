"""A sparse encoder (catalogue kind "sparse"): sentence-transformers' SparseEncoder (SPLADE) loaded from a
local directory or a pulled hub id, run by torch, for inference.embed_sparse.

A SPLADE model reads a text with a masked-language-model head and keeps, for every word of its
vocabulary, the strongest log(1 + relu(logit)) over the text's positions: a vector as wide as the
vocabulary (30,522 for BERT's) with a few dozen non-zero weights, which a search engine's inverted
index stores like BM25's term weights. Here each text's vector leaves the model as sentence-transformers
makes it (`SparseEncoder.encode`, same weights) and is handed to the task as the pair of arrays every
sparse store takes: its non-zero indices, ascending, and their weights. Loaded like the other kinds (in
the main process, never run there; warmed up in each child), in token-bounded passes (passes.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from inference_tasks.worker.runtimes.capabilities import SparseRow
from inference_tasks.worker.runtimes.passes import model_passes
from inference_tasks.worker.runtimes.torch.torch_model_facts import TorchModelFacts, float32_weights


class SpladeEncoder(TorchModelFacts):
    """A SPLADE model run by torch: a SparseEncoder (capabilities.py)."""

    def __init__(self, name: str, path: Path, device: str) -> None:
        from sentence_transformers import SparseEncoder

        super().__init__(name, device)
        self._model = SparseEncoder(str(path), device=device, local_files_only=True, model_kwargs=float32_weights())
        # The vocabulary's size, read from the configuration (no forward pass in the main process):
        # SpladePooling knows its width only after a first pass, and until then sentence-transformers'
        # get_embedding_dimension() answers the transformer's hidden size instead.
        transformer: Any = self._model[0]
        self.dim = int(transformer.auto_model.config.vocab_size)

    def encode_sparse(self, texts: Sequence[str]) -> list[SparseRow]:
        """Each text's sparse vector, in input order, from passes bounded by texts and padded tokens."""
        texts = list(texts)
        if self.max_pass_tokens is None or len(texts) <= 1:
            return self._encode(texts, self.batch_size)
        rows: list[SparseRow | None] = [None] * len(texts)
        for group in model_passes(self, texts):
            for index, row in zip(group, self._encode([texts[index] for index in group], len(group)), strict=True):
                rows[index] = row
        return [row for row in rows if row is not None]

    def _encode(self, texts: list[str], batch_size: int) -> list[SparseRow]:
        import torch

        matrix = self._model.encode(
            texts, batch_size=batch_size, convert_to_tensor=True, convert_to_sparse_tensor=True,
            show_progress_bar=False,
        ).coalesce()  # fmt: skip
        positions, weights = matrix.indices(), matrix.values().float()
        # coalesce() orders the non-zeros by (row, column): each row's run, its indices ascending.
        per_row = torch.bincount(positions[0], minlength=len(texts)).tolist()
        columns = positions[1].split(per_row)
        values = weights.split(per_row)
        return [
            SparseRow(column.cpu().numpy(), value.cpu().numpy()) for column, value in zip(columns, values, strict=True)
        ]

    def vocabulary_tokens(self, indices: Sequence[int]) -> list[str]:
        """The tokenizer's word piece for each vocabulary index (return_tokens)."""
        return list(self._model.tokenizer.convert_ids_to_tokens(list(indices)))

    @property
    def max_tokens(self) -> int | None:
        return int(self._model.max_seq_length) if self._model.max_seq_length else None

    def limit_length(self, tokens: int) -> None:
        self._model.max_seq_length = tokens
