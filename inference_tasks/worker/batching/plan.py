"""The hand-off between the two sides of micro-batching: what each task of a batch will encode.

The worker's main process (batcher.py) plans it from each request's arguments; the child that
runs the batch (batch_job.py) encodes the plans together. Neither side imports the other's code
for it, so the two stay one-directional: batcher -> batch_job, both -> plan.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from inference_tasks.config.catalogue import CROSS_ENCODER_KIND, SPARSE_KIND, ModelEntry
from inference_tasks.contract.options import document_prompt, query_prompt, resolve_prompt
from inference_tasks.contract.specs import SPECS
from inference_tasks.routing import CLASSIFY_TASK, EMBED_SPARSE_TASK, RERANK_TASK
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

    The call is bound to names by the task's spec (contract/specs.py), as the task will bind it; only
    the shape is checked (a list of non-empty strings, a boolean flag, a known prompt): the task
    validates everything again in the child, and a task planned as None runs there on its own and
    fails with the task's own message. The batch never depends on a bad task.
    """
    args, kwargs, spec = request.args, request.kwargs, SPECS.get(request.name)
    if spec is None or not isinstance(args, list | tuple) or not isinstance(kwargs, dict):
        return None
    if (request.name == EMBED_SPARSE_TASK) != (entry.kind == SPARSE_KIND):
        return None  # a sparse encoder serves embed_sparse only, and only a sparse encoder serves it
    try:
        call = spec.bind(args, kwargs)
    except InvalidInput:
        return None
    if request.name == RERANK_TASK:
        return _planned_rerank(request.id, call, entry)
    texts: Any = call.get("texts")
    normalize: Any = call.get("normalize", True)
    if not _texts(texts) or not isinstance(normalize, bool):
        return None
    prefix = query_prompt(entry) if request.name == CLASSIFY_TASK else ""
    if "prompt" in call:
        try:
            prefix = resolve_prompt(request.name, entry, call["prompt_name"], call["prompt"])
        except InvalidInput:
            return None
    return PlannedEncode(request.id, [prefix + text for text in texts] if prefix else texts, normalize)


def _planned_rerank(task_id: str, call: dict[str, Any], entry: ModelEntry) -> PlannedEncode | None:
    query, documents = call["query"], call["documents"]
    if not _texts([query]) or not _texts(documents):
        return None
    if entry.kind == CROSS_ENCODER_KIND:
        return PlannedEncode(task_id, documents, True, query=query)
    prefix = document_prompt(entry)
    return PlannedEncode(task_id, [query_prompt(entry) + query, *(prefix + document for document in documents)], True)


def _texts(texts: Any) -> bool:
    return isinstance(texts, list) and bool(texts) and all(isinstance(text, str) and text.strip() for text in texts)
