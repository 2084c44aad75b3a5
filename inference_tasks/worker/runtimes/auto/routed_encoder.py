"""A dense encoder that sends each forward pass to the runtime measured fastest for its number of texts:
on an Intel host with AMX, one sentence to CTranslate2 (half OpenVINO's time) and a 64-text pass to
OpenVINO bf16 (the faster there), both loaded in every child.

Every lane reads the same tokenizer files (each export copies the model's), so token counts, spans
and length limits are the first lane's; facts the child sets (pass sizes) reach every lane.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from inference_tasks.worker.runtimes.auto.choice_record import Lane, lane_for

if TYPE_CHECKING:
    import numpy as np

    from inference_tasks.worker.runtimes.capabilities import DenseEncoder


class RoutedEncoder:
    """Lanes of (texts per pass up to, encoder); `runtime_choice` says what the record measured."""

    backend = "auto"

    def __init__(self, name: str, lanes: list[tuple[Lane, DenseEncoder]], runtime_choice: dict[str, Any]) -> None:
        self.name = name
        self.device = "cpu"
        self.lanes = lanes
        self.runtime_choice = runtime_choice
        self.precision: str | None = None
        self.threads: int | None = None

    @property
    def _encoders(self) -> list[Any]:
        return [encoder for _, encoder in self.lanes]

    @property
    def dim(self) -> int:
        return max(encoder.dim for encoder in self._encoders)

    @dim.setter
    def dim(self, value: int) -> None:
        for encoder in self._encoders:
            encoder.dim = value

    @property
    def batch_size(self) -> int:
        return int(self._encoders[0].batch_size)

    @batch_size.setter
    def batch_size(self, value: int) -> None:
        for encoder in self._encoders:
            encoder.batch_size = value

    @property
    def max_pass_tokens(self) -> int | None:
        return self._encoders[0].max_pass_tokens

    @max_pass_tokens.setter
    def max_pass_tokens(self, value: int | None) -> None:
        for encoder in self._encoders:
            encoder.max_pass_tokens = value

    def place(self, device: str, dtype: str = "float32") -> None:
        for encoder in self._encoders:
            encoder.place(device, dtype)

    def limit_length(self, tokens: int) -> None:
        for encoder in self._encoders:
            encoder.limit_length(tokens)

    def compile(self, threads: int | None) -> None:
        for encoder in self._encoders:
            encoder.compile(threads)
        self.precision = "/".join(dict.fromkeys(str(encoder.precision) for encoder in self._encoders))
        self.threads = threads

    @property
    def max_tokens(self) -> int | None:
        return self._encoders[0].max_tokens

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        return self._encoders[0].token_counts(texts)

    def special_tokens(self) -> int:
        return self._encoders[0].special_tokens()

    def prefix_tokens(self, prefix: str) -> int:
        return self._encoders[0].prefix_tokens(prefix)

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        return self._encoders[0].token_spans(text)

    def encode(self, texts: Sequence[str], normalize: bool) -> np.ndarray:
        lane = lane_for([lane for lane, _ in self.lanes], len(texts))
        encoder = next(encoder for candidate, encoder in self.lanes if candidate == lane)
        return encoder.encode(texts, normalize)
