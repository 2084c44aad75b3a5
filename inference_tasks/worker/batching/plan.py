"""The hand-off between the two sides of micro-batching: what each task of a batch will encode.

The worker's main process (batcher.py) plans it from each request's arguments; the child that
runs the batch (batch_job.py) encodes the plans together. Neither side imports the other's code
for it, so the two stay one-directional: batcher -> batch_job, both -> plan.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from inference_tasks.config.catalogue import CROSS_ENCODER_KIND, SPARSE_KIND, ModelEntry
from inference_tasks.request_options import document_prompt, query_prompt, resolve_prompt
from inference_tasks.routing import CLASSIFY_TASK, EMBED_SPARSE_TASK, EMBED_TASK, RERANK_TASK
from inference_tasks.validation import InvalidInput

# A batch job's outcome for a task the child did not run because its recycle limit was spent
# (recycling.py); the main process sends that task on as a job of its own.
NOT_RUN = "inference-tasks:not-run:recycling"


@dataclass(frozen=True)
class PlannedEncode:
    """What a task will encode, read from its arguments in the main process: its texts as the model reads
    them (prompts applied), normalized or not; for a cross-encoder's rerank, the documents scored
    against `query`."""

    task_id: str
    texts: list[str]
    normalize: bool
    query: str | None = None


def planned_encode(request: Any, entry: ModelEntry) -> PlannedEncode | None:
    """The encode a task of ours will need (`entry`: the model served), or None when its arguments are
    not plainly valid.

    Only the shape is checked (a list of non-empty strings, a boolean flag, a known prompt): the task
    validates everything again in the child, and a task planned as None runs there on its own and
    fails with the task's own message. The batch never depends on a bad task.
    """
    args, kwargs = request.args, request.kwargs
    if not isinstance(args, list | tuple) or not isinstance(kwargs, dict):
        return None
    if (request.name == EMBED_SPARSE_TASK) != (entry.kind == SPARSE_KIND):
        return None  # a sparse encoder serves embed_sparse only, and only a sparse encoder serves it
    if request.name == RERANK_TASK:
        return _planned_rerank(request.id, args, kwargs, entry)
    texts: Any = args[0] if args else kwargs.get("texts")
    if not _texts(texts):
        return None
    normalize: Any = True
    prefix = ""
    if request.name in (EMBED_TASK, EMBED_SPARSE_TASK):
        if request.name == EMBED_TASK:
            normalize = args[1] if len(args) > 1 else kwargs.get("normalize", True)
        if not isinstance(normalize, bool):
            return None
        try:
            prefix = resolve_prompt(request.name, entry, kwargs.get("prompt_name"), kwargs.get("prompt"))
        except InvalidInput:
            return None
    elif request.name == CLASSIFY_TASK:
        prefix = query_prompt(entry)
    return PlannedEncode(request.id, [prefix + text for text in texts] if prefix else texts, normalize)


def _planned_rerank(task_id: str, args: Any, kwargs: dict[str, Any], entry: ModelEntry) -> PlannedEncode | None:
    query: Any = args[0] if args else kwargs.get("query")
    documents: Any = args[1] if len(args) > 1 else kwargs.get("documents")
    if not _texts([query]) or not _texts(documents):
        return None
    if entry.kind == CROSS_ENCODER_KIND:
        return PlannedEncode(task_id, documents, True, query=query)
    prefix = document_prompt(entry)
    return PlannedEncode(task_id, [query_prompt(entry) + query, *(prefix + document for document in documents)], True)


def _texts(texts: Any) -> bool:
    return isinstance(texts, list) and bool(texts) and all(isinstance(text, str) and text.strip() for text in texts)
