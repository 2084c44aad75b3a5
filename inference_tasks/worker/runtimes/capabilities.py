"""What tasks need from a model, by capability: small protocols that runtimes meet, none with a member
that raises "not supported".

Every model a worker serves is a `ServedModel` (facts the reports show, placement, a length limit).
On top of that it has one capability, the one its catalogue kind serves (worker/kinds/): a
`DenseEncoder` makes vectors, a `PairScorer` scores (query, document) pairs, a `SparseEncoder` makes
sparse vectors. A dense encoder whose tokenizer reports character offsets is also a `SpanTokenizer`
(inference.embed_chunks needs it). Runtimes live one folder each (torch/, openvino/, numpy/) and
are picked by runtimes/registry.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np


class ModelFacts(Protocol):
    """What reports show of a loaded model: its name, where and how it runs, and its pass sizes."""

    name: str
    device: str
    # The runtime (runtimes/registry.py) and the numeric precision it computes in.
    backend: str
    precision: str | None
    # Its own compute threads if it has a pool of its own (None: the process's pinned pools).
    threads: int | None
    # Texts per forward pass (INFERENCE_ENCODE_BATCH_SIZE_CPU/_CUDA, set when the child places it).
    batch_size: int
    # Padded tokens per forward pass (INFERENCE_MICROBATCH_MAX_TOKENS; None: texts alone bound a pass).
    max_pass_tokens: int | None


class ServedModel(ModelFacts, Protocol):
    """What a worker does with any model: limit what it reads, and place and compile it in a child."""

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


class TokenCounter(Protocol):
    """Word pieces as the model's own tokenizer splits a text (usage, truncation, chunk windows)."""

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        """Word pieces of each text, special tokens included, before truncation (runtimes/tokens.py)."""
        ...

    def special_tokens(self) -> int:
        """Special tokens added to every text."""
        ...

    def prefix_tokens(self, prefix: str) -> int:
        """Word pieces a prompt prefix adds."""
        ...


class TextModel(ServedModel, TokenCounter, Protocol):
    """A model that reads each text on its own (a dense or a sparse encoder), in token-bounded passes."""


class DenseEncoder(TextModel, Protocol):
    """An embedding model: texts in, one dense vector each (`dim` wide; 0 until a first encode says)."""

    dim: int

    def encode(self, texts: Sequence[str], normalize: bool) -> np.ndarray: ...


@runtime_checkable
class SpanTokenizer(Protocol):
    """A tokenizer that reports where each word piece sits in the text (chunking needs it)."""

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        """Each word piece's character span [start, end) in `text`."""
        ...


class PairScorer(ServedModel, Protocol):
    """A cross-encoder: a relevance score for each (query, document) pair, read together."""

    def score_pairs(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray: ...

    def pair_token_counts(self, query: str, documents: Sequence[str]) -> list[int]:
        """Word pieces of each (query, document) pair as the model reads it, before truncation."""
        ...


class SparseRow(NamedTuple):
    """One text's sparse vector: the vocabulary indices of its non-zero weights, ascending, and those weights."""

    indices: np.ndarray  # int64
    values: np.ndarray  # float32


class SparseEncoder(TextModel, Protocol):
    """A SPLADE model: texts in, one weight per vocabulary word each (`dim`: the vocabulary's size)."""

    dim: int

    def encode_sparse(self, texts: Sequence[str]) -> list[SparseRow]: ...

    def vocabulary_tokens(self, indices: Sequence[int]) -> list[str]:
        """The tokenizer's word piece for each vocabulary index."""
        ...
