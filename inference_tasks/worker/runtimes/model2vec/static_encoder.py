"""A model2vec static model as a DenseEncoder: each text's tokens looked up in one embedding table and
averaged (StaticModel.encode, the library's own), no network to run, so a text costs microseconds.

Loaded wherever the holder loads it (the table memory-mapped from safetensors and shared by fork), run
in the child with no thread pool of its own. model2vec stores the table in float16 (distil-model's
default); vectors leave as float32, normalized in float32 when asked or when the model always
normalizes, so a unit-length vector is one to float32's precision.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from inference_tasks.config.defaults import MODEL2VEC_RUNTIME
from inference_tasks.worker.runtimes.model2vec.manifest import check_manifest

if TYPE_CHECKING:
    import numpy as np

PRECISIONS = {"float16": "f16", "float32": "f32", "int8": "int8"}


class StaticEncoder:
    """A static model: DenseEncoder and SpanTokenizer (capabilities.py), CPU only."""

    backend = MODEL2VEC_RUNTIME

    def __init__(self, source: str, path: Path, device: str) -> None:
        if device != "cpu":
            raise ValueError(f"a static model runs on the CPU only (model2vec), not {device!r}")
        manifest = check_manifest(path)
        from model2vec import StaticModel
        from tokenizers import Tokenizer

        self._model = StaticModel.from_pretrained(path)
        # The name results carry: the one distil-model gave it, else the source as configured.
        self.name: str = manifest.get("name") or source
        # Whose vectors these are comparable with: its own, or its teacher's (distil-model --space teacher).
        bridged = manifest.get("space") == "teacher"
        self.vector_space: str = manifest["teacher"]["source"] if bridged else self.name
        self.device = device
        self.dim = int(self._model.dim)
        self.precision: str | None = PRECISIONS.get(self._model.embedding_dtype, self._model.embedding_dtype)
        self.threads: int | None = None
        # Reported like any model's; a call is one lookup whatever its size (encode does not split it).
        self.batch_size = 1024
        self.max_pass_tokens: int | None = None
        self._always_normalize = bool(self._model.normalize)
        self._max_length: int | None = self._model.max_length
        # Counting and offsets read whole texts: a copy of the tokenizer without the model's truncation.
        self._counter: Any = Tokenizer.from_str(self._model.tokenizer.to_str())
        self._counter.no_truncation()
        self._unknown = self._model.unk_token_id

    def encode(self, texts: Sequence[str], normalize: bool) -> np.ndarray:
        """Every text in one model2vec batch: a lookup has no padding to bound, and splitting 256 texts into
        the worker's passes of 32 cost a fifth more (docs/benchmarks-log.md, "The static lane")."""
        import numpy as np

        vectors = self._model.encode(
            list(texts), max_length=self._max_length, batch_size=max(1, len(texts)), show_progress_bar=False,
            use_multiprocessing=False, normalize=False,
        ).astype(np.float32)  # fmt: skip
        if normalize or self._always_normalize:
            vectors /= np.clip(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12, None)
        return vectors

    def place(self, device: str, dtype: str = "float32") -> None:
        if device != "cpu":
            raise ValueError(f"a static model runs on the CPU only (model2vec), not {device!r}")

    def compile(self, threads: int | None) -> None:
        """Nothing: a lookup and a mean, in the process's pinned numpy."""

    def limit_length(self, tokens: int) -> None:
        self._max_length = tokens

    @property
    def max_tokens(self) -> int | None:
        return self._max_length

    def _ids(self, texts: Sequence[str]) -> list[list[int]]:
        encoded = self._counter.encode_batch(list(texts), add_special_tokens=False)
        return [[token for token in item.ids if token != self._unknown] for item in encoded]

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        """Tokens the model averages (no special tokens; unknown pieces dropped, as model2vec drops them)."""
        return [len(ids) for ids in self._ids(texts)]

    def special_tokens(self) -> int:
        return 0

    def prefix_tokens(self, prefix: str) -> int:
        return len(self._ids([prefix])[0]) if prefix else 0

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        return [(start, end) for start, end in self._counter.encode(text, add_special_tokens=False).offsets]
