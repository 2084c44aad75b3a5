"""The model on CTranslate2 (INFERENCE_BACKEND=ctranslate2, and the auto runtime's small requests where
it measured fastest): the converted encoder run by `ctranslate2.Encoder` with int8 products, tokenized
and pooled exactly as sentence-transformers does (pipeline_encoder.py).

Why a second CPU runtime beside OpenVINO: on one sentence CTranslate2 spends about half OpenVINO's time
around a small network (docs/benchmarks-log.md, "The fast default"), on both the AMD and the Intel hosts.

Fork safety: the worker's main process only checks the export and loads the tokenizer; the
`Encoder` (its weights and its thread pool) is created by each child in `compile`, after the fork.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from inference_tasks.worker.runtimes.ctranslate2.export_paths import (
    COMPUTE_TYPE,
    MODEL_DIR,
    is_exported,
    missing_export_message,
)
from inference_tasks.worker.runtimes.export_files import MissingExport
from inference_tasks.worker.runtimes.pipeline_encoder import PipelineEncoder

if TYPE_CHECKING:
    import numpy as np


class Ct2Encoder(PipelineEncoder):
    """An exported sentence-transformers model on CTranslate2's CPU encoder. Loaded per process."""

    backend = "ctranslate2"

    def __init__(self, name: str, path: Path) -> None:
        if not is_exported(path):
            raise MissingExport(missing_export_message(name, path))
        self.name = name
        self.path = path
        self.device = "cpu"
        self.batch_size = 32
        self.max_pass_tokens: int | None = None
        self.precision: str | None = None
        self.threads: int | None = None
        self._load_pipeline(path)
        self._encoder: Any = None

    def compile(self, threads: int | None) -> None:
        """Load the encoder in this process with `threads` compute threads (None: CTranslate2's default)."""
        import ctranslate2

        self._encoder = ctranslate2.Encoder(
            str(self.path / MODEL_DIR), device="cpu", compute_type=COMPUTE_TYPE, inter_threads=1,
            intra_threads=threads or 0,
        )  # fmt: skip
        self.precision = COMPUTE_TYPE
        self.threads = threads

    def _before_encode(self) -> None:
        if self._encoder is None:
            self.compile(None)

    def _hidden(self, batch: dict[str, np.ndarray]) -> np.ndarray:
        import numpy as np

        lengths = batch["attention_mask"].sum(axis=1)
        ids = [row[:length].tolist() for row, length in zip(batch["input_ids"], lengths, strict=True)]
        hidden = np.asarray(self._encoder.forward_batch(ids).last_hidden_state)
        # Padded to the longest text, as the tokenizer's batch is: the attention mask pools it.
        return hidden

    def place(self, device: str, dtype: str = "float32") -> None:
        if device != "cpu":
            raise ValueError(f"the CTranslate2 backend runs on the CPU only here, not {device}")
