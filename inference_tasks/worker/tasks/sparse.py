"""inference.embed_sparse: a sparse encoder's (SPLADE's) vectors as index/value pairs, for hybrid search.

The request contract of inference.embed (model by alias, prompts, truncation, usage, micro-batching,
bad arguments failing with the argument named) on a model of catalogue kind "sparse". Each vector is
what sparse stores import (OpenSearch, Elasticsearch, Qdrant, Milvus, Vespa, pgvector's sparsevec):
its non-zero vocabulary indices in ascending order and their weights, optionally pruned to the
`top_k` largest and to weights of at least `min_weight`.
"""

from __future__ import annotations

from typing import Any

from celery import Task, shared_task

from inference_tasks.contract.options import resolve_prompt
from inference_tasks.contract.specs import EMBED_SPARSE
from inference_tasks.routing import EMBED_SPARSE_TASK
from inference_tasks.validation import check_count
from inference_tasks.worker.batching.strategy import CoalescedTask
from inference_tasks.worker.lifecycle.context import current
from inference_tasks.worker.runtimes.capabilities import SparseRow
from inference_tasks.worker.tasks.steps import EXPECTED_ERRORS, note_tokens, read_tokens
from inference_tasks.worker.tasks.usage import TaskClock


@shared_task(name=EMBED_SPARSE_TASK, bind=True, base=CoalescedTask, throws=EXPECTED_ERRORS)
def embed_sparse(self: Task, *args: Any, **kwargs: Any) -> dict[str, Any]:
    """Sparse vectors (contract/specs.py's EMBED_SPARSE): {"model", "alias", "revision", "dim" (the vocabulary's size),
    "embeddings": [{"indices": [int] ascending, "values": [float], "tokens"?: [str]} per text, in input
    order], "usage"}. Prompts and `truncate` as inference.embed.
    """
    clock = TaskClock.start(self.request)
    settings = self.app.settings
    request = EMBED_SPARSE.parse(args, kwargs, settings)
    texts, alias, return_tokens = request["texts"], request["model"], request["return_tokens"]
    holder = current().model
    encoder = holder.sparse(EMBED_SPARSE_TASK, alias)
    top_k = request["top_k"]
    if top_k is not None:
        top_k = check_count(EMBED_SPARSE_TASK, "top_k", top_k, 1, encoder.dim or 2**31)
    floor = request["min_weight"]
    prefix = resolve_prompt(EMBED_SPARSE_TASK, settings.served_model, request["prompt_name"], request["prompt"])
    truncate = request["truncate"]
    read = [prefix + text for text in texts] if prefix else texts
    count = read_tokens(EMBED_SPARSE_TASK, encoder, read, truncate)
    embeddings = []
    for row in holder.sparse_for(encoder, self.request.id, read, request["cache"]):
        kept = pruned(row, top_k, floor)
        embedding: dict[str, Any] = {"indices": kept.indices.tolist(), "values": kept.values.tolist()}
        if return_tokens:
            embedding["tokens"] = encoder.vocabulary_tokens(embedding["indices"])
        embeddings.append(embedding)
    usage = clock.usage(count, holder.shared, holder.cached)
    note_tokens(count)
    return {"model": encoder.name, "alias": alias, "revision": holder.revision, "dim": encoder.dim,
            "embeddings": embeddings, "usage": usage}  # fmt: skip


def pruned(row: SparseRow, top_k: int | None, min_weight: float) -> SparseRow:
    """`row` without its weights under `min_weight` and, with `top_k`, only its k largest (ties: the lower
    index), its indices still ascending."""
    import numpy as np

    indices, values = row.indices, row.values
    if min_weight > 0:
        keep = values >= min_weight
        indices, values = indices[keep], values[keep]
    if top_k is not None and len(values) > top_k:
        largest = np.sort(np.lexsort((indices, -values))[:top_k])
        indices, values = indices[largest], values[largest]
    return SparseRow(indices, values)
