"""A task's vectors as the request asked for them: Matryoshka dimensions, then the encoding on the wire.

`dimensions` keeps the first N components and, with `normalize`, scales them back to unit length:
the same vectors as sentence-transformers' `truncate_dim` (its encode truncates, then normalizes).
Quantized encodings follow sentence-transformers' `quantize_embeddings` exactly (reproduced in numpy
so a child of a numpy-only model needs no torch import): int8/uint8 put each component in one of
256 buckets between that dimension's calibration minimum and maximum (calibration.py: fixed per
model, never taken from the request's own batch, so a text's bytes do not depend on its
batch-mates); binary/ubinary keep each component's sign as one bit, eight per byte.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from inference_tasks import codec
from inference_tasks.routing import F32_BASE64_ENCODING, JSON_ENCODING

if TYPE_CHECKING:
    import numpy as np

BUCKETED_ENCODINGS = ("int8", "uint8")


def shaped(vectors: np.ndarray, dimensions: int | None, normalize: bool) -> np.ndarray:
    """The first `dimensions` components (None: all), unit length again when `normalize`."""
    import numpy as np

    if dimensions is None or dimensions >= vectors.shape[1]:
        return vectors
    kept = np.ascontiguousarray(vectors[:, :dimensions])
    if normalize:
        kept /= np.clip(np.linalg.norm(kept, axis=1, keepdims=True), 1e-12, None)
    return kept


def quantize(vectors: np.ndarray, encoding: str, ranges: np.ndarray | None = None) -> np.ndarray:
    """sentence-transformers' quantize_embeddings(vectors, encoding, ranges=ranges), in numpy."""
    import numpy as np

    if encoding in BUCKETED_ENCODINGS:
        if ranges is None:
            raise ValueError(f"{encoding} needs calibration ranges")
        ranges = ranges.astype(np.float32, copy=False)
        starts = ranges[0, :]
        steps = (ranges[1, :] - starts) / 255
        steps = np.where(steps == 0, 1, steps)
        buckets = np.clip(np.floor((vectors - starts) / steps), 0, 255)
        return buckets.astype(np.uint8) if encoding == "uint8" else (buckets - 128).astype(np.int8)
    if encoding == "binary":
        return (np.packbits(vectors > 0, axis=-1) - 128).astype(np.int8)
    if encoding == "ubinary":
        return np.packbits(vectors > 0, axis=-1)
    raise ValueError(f"not a quantized encoding: {encoding!r}")


def encoded(vectors: np.ndarray, encoding: str, ranges: np.ndarray | None = None) -> dict[str, Any]:
    """The result fields for `vectors` in `encoding`: {"dim", "embeddings"} for JSON numbers, plus
    "count" and "encoding" for the packed ones (little-endian float32, or the quantized bytes; `dim`
    stays the vector's dimension, binary rows are ceil(dim / 8) bytes)."""
    import base64

    import numpy as np

    dim = int(vectors.shape[1])
    if encoding == JSON_ENCODING:
        return {"dim": dim, "embeddings": vectors.tolist()}
    if encoding == F32_BASE64_ENCODING:
        payload = codec.encode_vectors(vectors)
    else:
        payload = base64.b64encode(np.ascontiguousarray(quantize(vectors, encoding, ranges)).tobytes()).decode()
    return {"dim": dim, "count": int(vectors.shape[0]), "encoding": encoding, "embeddings": payload}
