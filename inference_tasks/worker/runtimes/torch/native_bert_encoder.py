"""The torch runtime without sentence-transformers: native_bert's encoder inside pipeline_encoder's pipeline.

torch/loader.py serves a model this way when native_bert accepts it (the default model does) and falls
back to sentence-transformers otherwise; both report backend "torch", and `engine` says which. The
worker then imports torch and the tokenizers library only, not sentence-transformers, transformers or
scikit-learn: ~4 s less of a cold start (docs/benchmarks-log.md, "Cold start per runtime").
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from inference_tasks.worker.runtimes.pipeline_encoder import PipelineEncoder
from inference_tasks.worker.runtimes.torch.torch_model_facts import TorchModelFacts

if TYPE_CHECKING:
    import numpy as np

NATIVE_ENGINE = "native-bert"
MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


class NativeBertEncoder(PipelineEncoder, TorchModelFacts):
    """A BERT sentence-transformers model run by this project's own torch encoder (native_bert.py)."""

    engine = NATIVE_ENGINE

    def __init__(self, name: str, path: Path, device: str) -> None:
        from inference_tasks.worker.runtimes.torch import native_bert

        TorchModelFacts.__init__(self, name, device)
        self._load_pipeline(path)
        # Weights read into this process's memory, never run here: the worker's main process forks after.
        self._model = native_bert.load(path).to(device)

    def _hidden(self, batch: dict[str, np.ndarray]) -> np.ndarray:
        import torch

        # The JSON tokenizer (native_bert requires tokenizer.json) always gives all three inputs.
        with torch.inference_mode():
            inputs = {name: torch.from_numpy(batch[name]).to(self.device) for name in MODEL_INPUTS}
            return self._model(**inputs).float().cpu().numpy()
