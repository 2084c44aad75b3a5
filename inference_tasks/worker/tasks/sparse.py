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

from inference_tasks.request_options import resolve_prompt
from inference_tasks.routing import EMBED_SPARSE_TASK
from inference_tasks.validation import (
    check_count,
    check_flag,
    check_model,
    check_texts,
    check_weight,
    reject_unknown,
)
from inference_tasks.worker.batching.strategy import CoalescedTask
from inference_tasks.worker.lifecycle.context import current
from inference_tasks.worker.runtimes.sparse_model import SparseRow
from inference_tasks.worker.tasks.steps import EXPECTED_ERRORS, note_tokens, read_tokens, sparse_model
from inference_tasks.worker.tasks.usage import TaskClock

SPARSE_ARGUMENTS = ("texts", "top_k", "min_weight", "return_tokens", "model", "prompt_name", "prompt", "truncate")


@shared_task(name=EMBED_SPARSE_TASK, bind=True, base=CoalescedTask, throws=EXPECTED_ERRORS)
def embed_sparse(
    self: Task, texts: Any = None, *, top_k: Any = None, min_weight: Any = 0, return_tokens: Any = False,
    model: Any = None, prompt_name: Any = None, prompt: Any = None, truncate: Any = True, **unknown: Any,
) -> dict[str, Any]:  # fmt: skip
    """Sparse vectors: {"model", "alias", "dim" (the vocabulary's size), "embeddings": [{"indices": [int]
    ascending, "values": [float], "tokens"?: [str]} per text, in input order], "usage"}.

    `top_k`: keep only the k largest weights of each text (null: all); `min_weight`: drop weights below
    it (0: keep every non-zero one); `return_tokens`: each index's vocabulary word piece too. Prompts
    and `truncate` as inference.embed.
    """
    clock = TaskClock.start(self.request)
    reject_unknown(EMBED_SPARSE_TASK, unknown, SPARSE_ARGUMENTS)
    settings = self.app.settings
    alias = check_model(EMBED_SPARSE_TASK, model, settings)
    texts = check_texts(EMBED_SPARSE_TASK, texts, settings)
    holder = current().model
    encoder = sparse_model(EMBED_SPARSE_TASK, holder, alias)
    if top_k is not None:
        top_k = check_count(EMBED_SPARSE_TASK, "top_k", top_k, 1, encoder.dim or 2**31)
    floor = check_weight(EMBED_SPARSE_TASK, "min_weight", min_weight)
    return_tokens = check_flag(EMBED_SPARSE_TASK, "return_tokens", return_tokens)
    prefix = resolve_prompt(EMBED_SPARSE_TASK, settings.served_model, prompt_name, prompt)
    truncate = check_flag(EMBED_SPARSE_TASK, "truncate", truncate)
    read = [prefix + text for text in texts] if prefix else texts
    count = read_tokens(EMBED_SPARSE_TASK, encoder, read, truncate)
    embeddings = []
    for row in holder.sparse_for(self.request.id, read):
        kept = pruned(row, top_k, floor)
        embedding: dict[str, Any] = {"indices": kept.indices.tolist(), "values": kept.values.tolist()}
        if return_tokens:
            embedding["tokens"] = encoder.vocabulary_tokens(embedding["indices"])
        embeddings.append(embedding)
    usage = clock.usage(count, holder.shared)
    note_tokens(count)
    return {"model": encoder.name, "alias": alias, "dim": encoder.dim, "embeddings": embeddings, "usage": usage}


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
