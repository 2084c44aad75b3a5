"""`POST /v1/embeddings` in OpenAI's shape: the request as one inference.embed task, its vectors back.

The task returns every vector's float32 bytes in one base64 string (f32-base64, a quarter of JSON's size
through Redis); the gateway cuts it per input: OpenAI's base64 (each vector's little-endian float32
bytes) is those bytes as they are, and "float" is the same numbers as JSON."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from inference_tasks.config import Settings
from inference_tasks.config.catalogue import KIND_MAX_BATCH_TEXTS, ModelEntry
from inference_tasks.gateway.errors import bad_request
from inference_tasks.routing import F32_BASE64_ENCODING
from inference_tasks.validation import InvalidInput, check_texts

ROUTE = "POST /v1/embeddings"
ENCODING_FORMATS = ("float", "base64")


@dataclass(frozen=True)
class EmbeddingsRequest:
    texts: list[str]
    encoding_format: str
    dimensions: int | None

    def task_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"normalize": True, "encoding": F32_BASE64_ENCODING}
        if self.dimensions is not None:
            kwargs["dimensions"] = self.dimensions
        return kwargs


def parse(body: dict[str, Any], entry: ModelEntry, settings: Settings) -> EmbeddingsRequest:
    """The request's inputs, checked as a task checks them; ApiError 400 naming the field otherwise."""
    texts = body.get("input")
    if isinstance(texts, str):
        texts = [texts]
    if isinstance(texts, list) and texts and all(_is_tokens(item) for item in texts):
        raise bad_request("input: token arrays are not accepted; send the text (a string or a list of strings)",
                          "input")  # fmt: skip
    limit = entry.max_batch_texts or KIND_MAX_BATCH_TEXTS.get(entry.kind, settings.max_batch_texts)
    try:
        checked = check_texts(ROUTE, texts, settings, limit, name="input")
    except InvalidInput as error:
        raise bad_request(str(error), "input") from None
    encoding_format = body.get("encoding_format") or "float"
    if encoding_format not in ENCODING_FORMATS:
        raise bad_request(f"encoding_format must be one of {', '.join(ENCODING_FORMATS)}, got "
                          f"{str(encoding_format)[:40]!r}", "encoding_format")  # fmt: skip
    dimensions = body.get("dimensions")
    if dimensions is not None and (not isinstance(dimensions, int) or isinstance(dimensions, bool) or dimensions < 1):
        raise bad_request(f"dimensions must be a whole number of 1 or more, got {str(dimensions)[:40]!r}",
                          "dimensions")  # fmt: skip
    return EmbeddingsRequest(checked, encoding_format, dimensions)


def _is_tokens(item: Any) -> bool:
    """A token id, or a list of them (OpenAI's pre-tokenized input)."""
    if isinstance(item, int) and not isinstance(item, bool):
        return True
    return isinstance(item, list) and all(isinstance(token, int) for token in item)


def response(result: dict[str, Any], request: EmbeddingsRequest, model: str) -> bytes:
    """OpenAI's embeddings list from the task's f32-base64 result."""
    raw = base64.b64decode(result["embeddings"])
    dim = int(result["dim"])
    rows = np.frombuffer(raw, dtype="<f4").reshape(-1, dim)
    if request.encoding_format == "base64":
        size = dim * 4
        vectors: list[Any] = [
            base64.b64encode(raw[i * size : (i + 1) * size]).decode("ascii") for i in range(len(rows))
        ]
    else:
        vectors = list(rows)
    tokens = int(result.get("usage", {}).get("tokens", 0))
    body = {
        "object": "list",
        "data": [{"object": "embedding", "index": index, "embedding": vector} for index, vector in enumerate(vectors)],
        "model": model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }
    return orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY)
