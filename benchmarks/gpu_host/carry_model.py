"""Copy the default model for a GPU host the 64 MiB carry cannot take it to at full size.

The copy's weights are stored as float16 (45 MB instead of 91 MB) under their own names and shapes,
with config.json unchanged, so sentence-transformers widens them back to float32 when it loads them:
the GPU host serves the same network with each weight rounded to float16. Beside it, reference.json
holds texts and their vectors from the real float32 weights on this CPU, so the GPU check reports how
far what it served is from what a CPU worker serves (minimum cosine).

    .venv/bin/python -m benchmarks.gpu_host.carry_model .gpu-carry/model
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

REFERENCE_TEXTS = 64
SEED = 44


def main(target: Path) -> None:
    import torch
    from safetensors.torch import load_file, save_file

    from benchmarks.harness.workload import make_batches
    from inference_tasks.config.defaults import DEFAULT_MODEL
    from inference_tasks.worker.runtimes.model_files import resolve_model_path

    source = resolve_model_path(DEFAULT_MODEL)
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("model.safetensors", "README.md", "data_config.json"))
    weights = load_file(source / "model.safetensors")
    save_file({name: tensor.to(torch.float16) for name, tensor in weights.items()}, target / "model.safetensors")

    from sentence_transformers import SentenceTransformer

    texts = make_batches(1, REFERENCE_TEXTS, seed=SEED)[0]
    vectors = SentenceTransformer(str(source), device="cpu").encode(texts, normalize_embeddings=True)
    reference = {"model": DEFAULT_MODEL, "weights": "float32", "texts": texts, "vectors": vectors.tolist()}
    (target.parent / "reference.json").write_text(json.dumps(reference))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
