"""The result codec: plain JSON, written and read with orjson because embeddings are big.

A 64 x 384 embedding result is ~0.5 MB of JSON numbers. Python's json (through kombu) made the
queue hop cost a visible share of a pinned child's time per request; orjson writes the same JSON
text an order of magnitude faster (figures: docs/benchmarks-log.md, "Figures behind the code"). Only
results use it: task messages keep
kombu's json (what Ruby and every other producer send). Results stay plain JSON in Redis, so
any client reads them with any JSON parser; the content type name only tells our apps which
codec to use.
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any

import orjson
from kombu.serialization import register
from kombu.utils import json as kombu_json

if TYPE_CHECKING:
    import numpy as np

RESULT_SERIALIZER = "inference-json"
RESULT_CONTENT_TYPE = "application/x-inference-json"
_ORJSON_OPTIONS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS


def dumps(value: Any) -> bytes:
    """JSON text of `value`; anything orjson cannot write (Decimal, very big ints) goes through
    kombu's json, whose type markers loads() then restores."""
    try:
        return orjson.dumps(value, option=_ORJSON_OPTIONS)
    except TypeError:
        return kombu_json.dumps(value).encode("utf-8")


def loads(payload: bytes | str) -> Any:
    """Inverse of dumps(); kombu's decoder only for a payload that carries its type markers."""
    if isinstance(payload, str):
        payload = payload.encode("utf-8")
    if b'"__type__"' in payload:
        return kombu_json.loads(payload)
    return orjson.loads(payload)


def register_result_codec() -> None:
    """Make the codec known to kombu (idempotent); every app of this package calls it."""
    register(RESULT_SERIALIZER, dumps, loads, content_type=RESULT_CONTENT_TYPE, content_encoding="binary")


# Embeddings as `encoding: "f32-base64"` (embed results, corpus pages, head weights). numpy is
# imported on use: producers import this module through the app and most never decode vectors.
def encode_vectors(array: np.ndarray) -> str:
    """Little-endian float32, base64: Ruby reads it with Base64.decode64(s).unpack("e*")."""
    import numpy as np

    return base64.b64encode(np.ascontiguousarray(array, dtype="<f4").tobytes()).decode()


def decode_vectors(text: str, dim: int | None = None) -> np.ndarray:
    """The inverse of encode_vectors; with `dim`, one row per vector."""
    import numpy as np

    flat = np.frombuffer(base64.b64decode(text), dtype="<f4").copy()
    return flat if dim is None else flat.reshape(-1, dim)


def decode_embeddings(result: dict[str, Any]) -> np.ndarray:
    """The vectors of an inference.embed result (or of one embed_chunks chunk), whatever its encoding:
    float32 rows for "json" and "f32-base64"; the quantized bytes as int8 rows ("int8", "binary") or
    uint8 rows ("uint8", "ubinary"), binary rows being ceil(dim / 8) bytes of packed sign bits."""
    import numpy as np

    encoding = result.get("encoding", "json")
    if encoding == "json":
        return np.asarray(result["embeddings"], dtype=np.float32)
    raw = base64.b64decode(result["embeddings"])
    dim = int(result["dim"])
    if encoding in ("f32-base64", "f32le-base64"):
        return np.frombuffer(raw, dtype="<f4").reshape(-1, dim).copy()
    width = dim if encoding in ("int8", "uint8") else (dim + 7) // 8
    dtype = np.int8 if encoding in ("int8", "binary") else np.uint8
    return np.frombuffer(raw, dtype=dtype).reshape(-1, width).copy()
