"""sentence-transformers' pipeline around an encoder, reproduced for runtimes that run the encoder themselves.

For a model directory of the usual kind (modules.json: Transformer, Pooling, optionally Normalize),
what sentence-transformers does around the network is small: strip (and lower-case where the model
says so), tokenize with the model's own tokenizer and max_seq_length, run the encoder, pool as
1_Pooling's config names (mean, CLS or max), and L2-normalise when the model has a Normalize module
or the caller asks. Runtimes that do not import sentence-transformers (OpenVINO, whose package would
pull optimum-intel; the native BERT on torch, which starts in a fraction of its import time) share
this class and supply only `_hidden`, the encoder's last hidden states for a tokenized batch.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from inference_tasks.worker.runtimes import tokens
from inference_tasks.worker.runtimes.passes import encode_in_passes

if TYPE_CHECKING:
    import numpy as np

    from inference_tasks.worker.runtimes.capabilities import DenseEncoder

TRANSFORMER_MODULE = "sentence_transformers.models.Transformer"
NORMALIZE_MODULE = "sentence_transformers.models.Normalize"
POOLING_MODULE = "sentence_transformers.models.Pooling"
POOLING_KEYS = {"mean": "pooling_mode_mean_tokens", "cls": "pooling_mode_cls_token", "max": "pooling_mode_max_tokens"}


def read_json(path: Path, default: Any) -> Any:
    return json.loads(path.read_text()) if path.is_file() else default


def pipeline_config(path: Path) -> dict[str, Any]:
    """What sentence-transformers would do around the encoder, read from the model's own files."""
    modules = read_json(path / "modules.json", [])
    kinds = {module.get("type") for module in modules}
    pooling_dir = next((module["path"] for module in modules if module.get("type") == POOLING_MODULE), "1_Pooling")
    pooling = read_json(path / pooling_dir / "config.json", {})
    switched_on = [key for key, value in pooling.items() if key.startswith("pooling_mode") and value is True]
    modes = [mode for mode, key in POOLING_KEYS.items() if key in switched_on]
    if len(switched_on) != 1 or not modes:
        raise ValueError(f"this runtime supports one of mean, CLS or max pooling; {path} asks for {pooling}")
    settings = read_json(path / "sentence_bert_config.json", {})
    return {
        "pooling": modes[0],
        "dim": int(pooling.get("word_embedding_dimension") or 0),
        "normalize": NORMALIZE_MODULE in kinds,
        "modules": [module.get("type") for module in modules],
        "max_seq_length": settings.get("max_seq_length"),
        "do_lower_case": bool(settings.get("do_lower_case", False)),
    }


class PipelineEncoder:
    """An embedding model whose encoder a subclass runs (`_hidden`); the rest is sentence-transformers'
    pipeline, as above. `_load_pipeline` reads the model directory (tokenizer and configs only)."""

    dim: int
    batch_size: int
    max_pass_tokens: int | None

    def _load_pipeline(self, path: Path) -> None:
        from inference_tasks.worker.runtimes.json_tokenizer import load_tokenizer

        pipeline = pipeline_config(path)
        self.dim = pipeline["dim"]
        self._pooling = pipeline["pooling"]
        self._always_normalize = pipeline["normalize"]
        self._lower_case = pipeline["do_lower_case"]
        self._tokenizer = load_tokenizer(path)
        self._max_length = pipeline["max_seq_length"] or self._tokenizer.model_max_length

    def _hidden(self, batch: dict[str, np.ndarray]) -> np.ndarray:
        """The encoder's last hidden states (texts x tokens x dim) for a tokenized, padded batch."""
        raise NotImplementedError

    def _before_encode(self) -> None:
        """Anything a runtime does once before its first pass in this process (OpenVINO compiles)."""

    def limit_length(self, tokens: int) -> None:
        self._max_length = tokens

    @property
    def max_tokens(self) -> int | None:
        return int(self._max_length) if self._max_length else None

    def _cleaned(self, text: str) -> str:
        return text.strip().lower() if self._lower_case else text.strip()

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        return tokens.token_counts(self._tokenizer, [self._cleaned(text) for text in texts])

    def special_tokens(self) -> int:
        return tokens.special_tokens(self._tokenizer)

    def prefix_tokens(self, prefix: str) -> int:
        return tokens.prefix_tokens(self._tokenizer, self._cleaned(prefix))

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        # The original text: spans must index it (a tokenizer's own lower-casing keeps offsets).
        return tokens.token_spans(self._tokenizer, text)

    def encode(self, texts: Sequence[str], normalize: bool) -> np.ndarray:
        """Vectors in input order; texts are encoded longest first in batches, as sentence-transformers does."""
        import numpy as np

        self._before_encode()
        if self.max_pass_tokens is not None and len(texts) > 1:
            # A subclass is a whole DenseEncoder (its runtime adds place, compile and the facts).
            vectors = encode_in_passes(cast("DenseEncoder", self), list(texts), self._encode_batch)
        else:
            order = np.argsort([-len(text) for text in texts], kind="stable")
            chunks = []
            for start in range(0, len(texts), self.batch_size):
                chunk = order[start : start + self.batch_size]
                chunks.append((chunk, self._encode_batch([texts[i] for i in chunk])))
            self.dim = self.dim or int(chunks[0][1].shape[1])
            vectors = np.empty((len(texts), self.dim), dtype=np.float32)
            for chunk, batch in chunks:
                vectors[chunk] = batch
        if normalize or self._always_normalize:
            vectors /= np.clip(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12, None)
        return vectors

    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        import numpy as np

        batch = self._tokenizer(
            [self._cleaned(text) for text in texts], padding=True, truncation="longest_first",
            max_length=self._max_length, return_tensors="np",
        )  # fmt: skip
        hidden = self._hidden(batch)
        mask = batch["attention_mask"][..., None].astype(np.float32)
        if self._pooling == "cls":
            return hidden[:, 0].astype(np.float32)
        if self._pooling == "max":
            return np.where(mask > 0, hidden, -1e9).max(axis=1).astype(np.float32)
        return ((hidden * mask).sum(axis=1) / np.clip(mask.sum(axis=1), 1e-9, None)).astype(np.float32)
