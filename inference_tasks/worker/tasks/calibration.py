"""Per-model calibration of the int8/uint8 encodings: each dimension's range over a fixed corpus.

sentence-transformers calibrates int8 on the embeddings it is given unless told otherwise; a service
that did that per request would give the same text different bytes depending on its batch-mates
(and a one-text request could not be calibrated at all). Here the ranges come from the model's own
vectors of a corpus shipped with the package (inference_tasks/ml/calibration_texts.jsonl: the
support tickets, short, odd, multilingual and long texts), computed once per model, runtime and
corpus, and stored in the model cache directory (INFERENCE_MODEL_CACHE/calibration) beside the
exports, so every child and every worker on the host reads the same ranges. The first quantized
request on a host pays the computation once (370 texts; docs/benchmarks.md has its time).

The stored vectors are the model's raw output (normalize false, every dimension); the ranges for a
request's `normalize` and `dimensions` are taken over those vectors shaped the same way, so they
always describe what is being quantized.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, cast

from inference_tasks.ml.corpus import corpus_digest, corpus_texts
from inference_tasks.worker.tasks.vectors import shaped

if TYPE_CHECKING:
    import numpy as np

    from inference_tasks.config import Settings
    from inference_tasks.worker.kinds.model_holder import ModelHolder
    from inference_tasks.worker.runtimes.capabilities import DenseEncoder

logger = logging.getLogger(__name__)


def stored_path(encoder: DenseEncoder, source: str, cache: Path) -> Path:
    """Where the calibration vectors of this model, on this runtime, for this corpus, are kept."""
    digest = hashlib.sha256()
    digest.update(f"{encoder.name}|{encoder.backend}|{encoder.precision}|{corpus_digest()}".encode())
    model_dir = Path(source).expanduser()
    if model_dir.is_dir():
        for name in ("config.json", "modules.json"):
            if (model_dir / name).is_file():
                digest.update((model_dir / name).read_bytes())
        for path in sorted(model_dir.glob("*.safetensors")) + sorted(model_dir.glob("pytorch_model*.bin")):
            digest.update(f"{path.name}:{path.stat().st_size}".encode())
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", Path(encoder.name).name).strip("-") or "model"
    return cache / "calibration" / f"{name}-{encoder.backend}-{digest.hexdigest()[:12]}.npy"


def calibration_vectors(encoder: DenseEncoder, source: str, cache: Path) -> np.ndarray:
    """The model's raw vectors of the corpus: read from the cache, else computed here and stored."""
    import numpy as np

    path = stored_path(encoder, source, cache)
    try:
        return np.load(path)
    except FileNotFoundError:
        pass
    except Exception:
        logger.warning("calibration vectors at %s are unreadable; computing them again", path, exc_info=True)
    vectors = encoder.encode(corpus_texts(), normalize=False).astype(np.float32)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".npy.tmp", delete=False) as file:
            np.save(file, vectors)
        os.replace(file.name, path)  # whole file or none: a concurrent child reads either
        logger.info("calibration vectors of %s stored at %s", encoder.name, path)
    except OSError:
        logger.warning("could not store calibration vectors at %s; this process keeps its own", path, exc_info=True)
    return vectors


def ranges(holder: ModelHolder, settings: Settings, normalize: bool, dimensions: int | None) -> np.ndarray:
    """Each dimension's (minimum, maximum) over the calibration vectors shaped as the request's are;
    kept per child by (normalize, dimensions)."""
    import numpy as np

    key = (normalize, dimensions)
    if key not in holder.calibration:
        if "raw" not in holder.calibration:
            holder.calibration["raw"] = calibration_vectors(
                cast("DenseEncoder", holder.get()), settings.served_model.source, settings.model_cache_dir
            )
        raw = holder.calibration["raw"]
        if normalize:
            raw = raw / np.clip(np.linalg.norm(raw, axis=1, keepdims=True), 1e-12, None)
        vectors = shaped(raw.copy(), dimensions, normalize)
        holder.calibration[key] = np.vstack((vectors.min(axis=0), vectors.max(axis=0)))
    return holder.calibration[key]
