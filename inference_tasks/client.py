"""Blocking calls for Python producers, the counterpart of the Ruby client's `embed`, `rerank`,
`embed_chunks` and `embed_sparse`: send (routed by model, bounded by max_queue_depth), wait, delete the result once
read, and decode packed vectors into numpy arrays.

    from inference_tasks import app, client
    found = client.rerank(app, "refund for a double charge", passages, top_n=3)
    chunks = client.embed_chunks(app, [long_document], chunk_tokens=128)

Every call takes `cache` (None: the task's default, true): false asks a worker with the fleet's embedding
cache (INFERENCE_CACHE_URL) to compute every text and store none; sent only when given, so a call that
leaves it unset reaches a worker of any version.

Producer-safe: imports no torch and no worker code (numpy only when decoding).
"""

from __future__ import annotations

from typing import Any

from inference_tasks import producer
from inference_tasks.codec import decode_embeddings
from inference_tasks.routing import EMBED_CHUNKS_TASK, EMBED_SPARSE_TASK, EMBED_TASK, JSON_ENCODING, RERANK_TASK

# embed_sparse's forms of a sparse vector: the wire's {"indices", "values"} lists, or {index: weight}.
SPARSE_FORMS = ("lists", "dict")


def _call(app: Any, task: str, args: list[Any], kwargs: dict[str, Any], timeout: float, model: str | None,
          max_queue_depth: int | None) -> Any:  # fmt: skip
    sent = producer.send(app, task, args=args, kwargs=kwargs, model=model, max_queue_depth=max_queue_depth)
    return producer.collect(sent, timeout)


def _given(**options: Any) -> dict[str, Any]:
    """The options a caller set (None: the task's own default)."""
    return {name: value for name, value in options.items() if value is not None}


def embed(
    app: Any, texts: list[str], *, normalize: bool = True, encoding: str = JSON_ENCODING,
    prompt_name: str | None = None, prompt: str | None = None, dimensions: int | None = None,
    truncate: bool | None = None, model: str | None = None, timeout: float = 30, max_queue_depth: int | None = None,
    cache: bool | None = None,
) -> dict[str, Any]:  # fmt: skip
    """inference.embed's result with "embeddings" as a numpy array whatever the encoding (float32 rows,
    or the int8/uint8 rows of a quantized one)."""
    kwargs = {"normalize": normalize, "encoding": encoding}
    kwargs |= _given(prompt_name=prompt_name, prompt=prompt, dimensions=dimensions, truncate=truncate, cache=cache)
    result = _call(app, EMBED_TASK, [texts], kwargs, timeout, model, max_queue_depth)
    return {**result, "embeddings": decode_embeddings(result)}


def rerank(
    app: Any, query: str, documents: list[str], *, top_n: int | None = None, return_documents: bool = False,
    truncate: bool | None = None, model: str | None = None, timeout: float = 30, max_queue_depth: int | None = None,
    cache: bool | None = None,
) -> dict[str, Any]:  # fmt: skip
    """inference.rerank's result: {"method", "results": [{"index", "score", "relevance_score", "document"?}] best
    first, "usage", ...}."""
    kwargs = {"return_documents": return_documents} | _given(top_n=top_n, truncate=truncate, cache=cache)
    result: dict[str, Any] = _call(app, RERANK_TASK, [query, documents], kwargs, timeout, model, max_queue_depth)
    return result


def embed_sparse(
    app: Any, texts: list[str], *, model: str, top_k: int | None = None, min_weight: float | None = None,
    return_tokens: bool = False, prompt_name: str | None = None, prompt: str | None = None,
    truncate: bool | None = None, form: str = "lists", timeout: float = 30, max_queue_depth: int | None = None,
    cache: bool | None = None,
) -> dict[str, Any]:  # fmt: skip
    """inference.embed_sparse's result from the sparse model `model` (an alias), in plain Python (no scipy):
    "embeddings" holds per text {"indices": [int], "values": [float], "tokens"?} with form="lists" (as
    sent), or {index: weight} with form="dict" ({token: weight} with return_tokens)."""
    if form not in SPARSE_FORMS:
        raise ValueError(f"form must be one of {SPARSE_FORMS}, got {form!r}")
    kwargs = {"return_tokens": return_tokens}
    kwargs |= _given(top_k=top_k, min_weight=min_weight, prompt_name=prompt_name, prompt=prompt, truncate=truncate,
                     cache=cache)  # fmt: skip
    result: dict[str, Any] = _call(app, EMBED_SPARSE_TASK, [texts], kwargs, timeout, model, max_queue_depth)
    if form == "dict":
        result["embeddings"] = [
            dict(zip(row["tokens"] if return_tokens else row["indices"], row["values"], strict=True))
            for row in result["embeddings"]
        ]
    return result


def embed_chunks(
    app: Any, texts: list[str], *, chunk_tokens: int | None = None, overlap_tokens: int = 32, normalize: bool = True,
    encoding: str = JSON_ENCODING, prompt_name: str | None = None, prompt: str | None = None,
    dimensions: int | None = None, model: str | None = None, timeout: float = 120,
    max_queue_depth: int | None = None, cache: bool | None = None,
) -> dict[str, Any]:  # fmt: skip
    """inference.embed_chunks' result with each chunk's "embedding" as a numpy vector (float32, or the
    quantized row); "chunks" holds one list per text of {"start", "end", "embedding"}."""
    kwargs = {"overlap_tokens": overlap_tokens, "normalize": normalize, "encoding": encoding}
    kwargs |= _given(chunk_tokens=chunk_tokens, prompt_name=prompt_name, prompt=prompt, dimensions=dimensions,
                     cache=cache)  # fmt: skip
    result = _call(app, EMBED_CHUNKS_TASK, [texts], kwargs, timeout, model, max_queue_depth)
    packed = {"encoding": result["encoding"], "dim": result["dim"]}
    result["chunks"] = [
        [{**chunk, "embedding": decode_embeddings({**packed, "embeddings": _one(chunk["embedding"], packed)})[0]}
         for chunk in chunks]
        for chunks in result["chunks"]
    ]  # fmt: skip
    return result


def _one(embedding: Any, packed: dict[str, Any]) -> Any:
    """A chunk's embedding in the form decode_embeddings reads: a JSON vector as a one-row matrix."""
    return [embedding] if packed["encoding"] == JSON_ENCODING else embedding
