"""What a micro-batch's tasks encode together: planned from each request's arguments in the worker's main
process (`PlannedEncode`), computed in one pass in the child, and handed to each task as its share
(`PreEncoded`). Both sides ask the model's kind (model_kind.py) for their part."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from inference_tasks.config.catalogue import ModelEntry
from inference_tasks.contract.options import query_prompt, resolve_prompt
from inference_tasks.routing import CLASSIFY_TASK
from inference_tasks.validation import InvalidInput


@dataclass(frozen=True)
class PlannedEncode:
    """What a task will encode, read from its arguments in the main process: its texts as the model reads
    them (prompts applied), normalized or not; for a cross-encoder's rerank, the documents scored
    against `query`."""

    task_id: str
    texts: list[str]
    normalize: bool
    query: str | None = None
    # The task's `cache` argument: false, its texts bypass the embedding cache (worker/cache/).
    cache: bool = True


@dataclass(frozen=True)
class PreEncoded:
    """A task's texts as encoded with its batch-mates' (micro-batching), waiting for the task to run:
    vectors (a dense encoder), scores against `query` (a pair scorer) or a list of SparseRow (a
    sparse encoder); `started_at` (Unix time) when the shared pass began and `seconds` this task's
    share of it, by its number of texts (usage)."""

    texts: list[str]
    normalize: bool
    vectors: Any
    query: str | None = None
    started_at: float = 0.0
    seconds: float = 0.0
    # The shared pass's span context when tracing (task_traces.py): the task's span links to it.
    trace_link: Any = None
    # How many of its texts the embedding cache answered (usage.cached).
    cached: int = 0


def planned_texts(task: str, task_id: str, call: dict[str, Any], entry: ModelEntry) -> PlannedEncode | None:
    """The texts a task of the embed family (embed, classify, embed_sparse...) will encode, prompts
    applied as the task applies them; None when its arguments are not plainly valid."""
    texts: Any = call.get("texts")
    normalize: Any = call.get("normalize", True)
    cache: Any = call.get("cache", True)
    if not plain_texts(texts) or not isinstance(normalize, bool) or not isinstance(cache, bool):
        return None
    prefix = query_prompt(entry) if task == CLASSIFY_TASK else ""
    if "prompt" in call:
        try:
            prefix = resolve_prompt(task, entry, call["prompt_name"], call["prompt"])
        except InvalidInput:
            return None
    return PlannedEncode(task_id, [prefix + text for text in texts] if prefix else texts, normalize, cache=cache)


def plain_texts(texts: Any) -> bool:
    """A non-empty list of non-blank strings."""
    return isinstance(texts, list) and bool(texts) and all(isinstance(text, str) and text.strip() for text in texts)
