"""The accuracy gate every measured runtime choice passes (openvino/measure.py, auto/measure.py): a
candidate's vectors against sentence-transformers' own f32 vectors on held-out texts (held_out.py).

Runs in an offline command's process (export-model), never in a worker: it runs torch forward passes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from inference_tasks.worker.runtimes.held_out import held_out_texts

# The least cosine to torch's f32 vector, over every held-out text, that a candidate may serve with.
GATE_MIN_COSINE = 0.99


def min_cosines(
    source: Path, encoders: dict[str, Any], texts: list[str] | None = None, one_by_one: int = 0
) -> dict[str, float]:  # fmt: skip
    """Each candidate's least cosine to sentence-transformers' own f32 vectors over `texts` (the
    held-out texts unless given), encoded in batches, and the first `one_by_one` of them also each
    on its own (a runtime whose one-text path differs: OpenVINO's static shapes)."""
    import numpy as np
    from sentence_transformers import SentenceTransformer

    from inference_tasks.worker.runtimes.torch.torch_model_facts import float32_weights

    texts = held_out_texts() if texts is None else texts
    torch_model = SentenceTransformer(str(source), device="cpu", local_files_only=True, model_kwargs=float32_weights())
    reference = torch_model.encode(texts, normalize_embeddings=True, batch_size=32)
    found = {}
    for name, encoder in encoders.items():
        vectors = encoder.encode(texts, normalize=True)
        alone = [encoder.encode([text], normalize=True)[0] for text in texts[:one_by_one]]
        if alone:
            vectors = np.concatenate([vectors, np.stack(alone)])
        found[name] = float(np.min((np.concatenate([reference, reference[: len(alone)]]) * vectors).sum(axis=1)))
    return found
