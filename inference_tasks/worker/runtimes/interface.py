"""What tasks need from a model, whatever runs it: the `Embedder` protocol every runtime meets, and the
base every embedding model's runtime (torch, OpenVINO, numpy) starts from."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from inference_tasks.config.catalogue import EMBEDDING_KIND

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
        """Word pieces of each text as the model's tokenizer splits it, before truncation (runtimes/tokens.py)."""
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


class EmbeddingModel:
    """What every embedding model shares: its kind, and no pair scoring (a cross-encoder's job)."""

    kind = EMBEDDING_KIND

    def score_pairs(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        raise TypeError(f"{type(self).__name__} is an embedding model; it does not score (query, document) pairs")
