"""A torch-run sentence-transformers model (a dense encoder, a cross-encoder or a sparse encoder): the facts it
reports, its tokenizer's counts, and moving it onto a child's device."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from inference_tasks.worker.runtimes import tokens

CUDA_PRECISIONS = {"float16": "f16", "bfloat16": "bf16"}


class TorchModelFacts:
    """What a sentence-transformers model run by torch reports (capabilities.ModelFacts) before
    place_model sets its passes: f32 until placed in another dtype, no thread pool of its own."""

    backend = "torch"
    # Who runs the network: sentence-transformers here; NativeBertEncoder says "native-bert".
    engine = "sentence-transformers"
    # The torch module the subclass runs (SentenceTransformer, CrossEncoder, SparseEncoder or native_bert's
    # Bert), moved by place().
    _model: Any

    def __init__(self, name: str, device: str) -> None:
        self.name = name
        self.device = device
        self.precision: str | None = "f32"
        # torch's own pools (threads.compute_threads reads them); nothing of its own.
        self.threads: int | None = None
        # Texts (or pairs) per forward pass within one call (INFERENCE_ENCODE_BATCH_SIZE_CPU/_CUDA), and
        # padded tokens per pass (INFERENCE_MICROBATCH_MAX_TOKENS); place_model sets both.
        self.batch_size = 32
        self.max_pass_tokens: int | None = None

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        return tokens.token_counts(self._model.tokenizer, texts)

    def special_tokens(self) -> int:
        return tokens.special_tokens(self._model.tokenizer)

    def prefix_tokens(self, prefix: str) -> int:
        return tokens.prefix_tokens(self._model.tokenizer, prefix)

    def compile(self, threads: int | None) -> None:
        """Nothing: torch's pools are pinned for the whole process (threads.py)."""

    def place(self, device: str, dtype: str = "float32") -> None:
        """Move the weights to `device` (a child moving the main process's CPU copy to its GPU)."""
        self.precision = place_module(self._model, device, dtype) or self.precision
        self.device = device


def float32_weights() -> dict[str, Any]:
    """`model_kwargs` that load a checkpoint's weights as float32, whatever dtype it stores them in.

    transformers 5 loads a checkpoint in the dtype it was saved in: a float16 checkpoint (common on the
    hub) would run in float16 on the CPU, several times slower, while this runtime reports f32. A CUDA
    child chooses its own dtype when it is placed (INFERENCE_CUDA_DTYPE, place_module).
    """
    import torch

    return {"dtype": torch.float32}


def place_module(module: Any, device: str, dtype: str) -> str | None:
    """Move `module` to `device`, in `dtype` on CUDA; the precision it then computes in, or None if unchanged."""
    import torch

    module.to(device)
    if device.startswith("cuda") and dtype != "float32":
        module.to(getattr(torch, dtype))
        return CUDA_PRECISIONS.get(dtype, dtype)
    return None
