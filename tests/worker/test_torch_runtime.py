"""The torch runtime's weights: whatever dtype a checkpoint stores, the CPU computes in float32."""

from __future__ import annotations

import shutil

import pytest

from inference_tasks.config.defaults import DEFAULT_MODEL
from inference_tasks.worker.runtimes.model_files import resolve_model_path
from inference_tasks.worker.runtimes.torch.sentence_transformer_encoder import SentenceTransformerEncoder


@pytest.mark.worker
def test_a_float16_checkpoint_is_served_in_float32_on_the_cpu(tmp_path):
    """transformers 5 loads a checkpoint in the dtype it was saved in; a float16 copy of the default model
    (as many hub models are stored, and as the GPU check carries it) must still run in float32 on the CPU
    (float16 matrix products there were ~3x slower, found by the GPU check's dry run) and give the same
    vectors as the float32 original to float16 rounding."""
    import numpy as np
    import torch
    from safetensors.torch import load_file, save_file

    source = resolve_model_path(DEFAULT_MODEL)
    copy = tmp_path / "model-f16"
    shutil.copytree(source, copy, ignore=shutil.ignore_patterns("model.safetensors"))
    weights = load_file(source / "model.safetensors")
    save_file({name: tensor.to(torch.float16) for name, tensor in weights.items()}, copy / "model.safetensors")

    served = SentenceTransformerEncoder("f16-copy", copy, "cpu")
    original = SentenceTransformerEncoder(DEFAULT_MODEL, source, "cpu")

    assert {parameter.dtype for parameter in served._model.parameters()} == {torch.float32}
    assert served.precision == "f32"
    texts = ["the invoice was charged twice", "how do I reset my password?"]
    cosines = (served.encode(texts, normalize=True) * original.encode(texts, normalize=True)).sum(axis=1)
    assert np.all(cosines > 0.9999)
