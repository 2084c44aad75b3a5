"""The hand-off between the two sides of micro-batching: what each task of a batch will encode.

The worker's main process (batcher.py) plans it from each request's arguments; the child that
runs the batch (batch_job.py) encodes the plans together. Neither side imports the other's code
for it, so the two stay one-directional: batcher -> batch_job, both -> plan.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from inference_tasks.routing import EMBED_TASK

# A batch job's outcome for a task the child did not run because its recycle limit was spent
# (recycling.py); the main process sends that task on as a job of its own.
NOT_RUN = "inference-tasks:not-run:recycling"


@dataclass(frozen=True)
class PlannedEncode:
    """What a task will encode, read from its arguments in the main process: its texts, normalized or not."""

    task_id: str
    texts: list[str]
    normalize: bool


def planned_encode(request: Any) -> PlannedEncode | None:
    """The encode a task of ours will need, or None when its arguments are not plainly valid.

    Only the shape is checked (a list of non-empty strings, a boolean flag): the task validates
    everything again in the child, and a task planned as None runs there on its own and fails
    with the task's own message. The batch never depends on a bad task.
    """
    args, kwargs = request.args, request.kwargs
    if not isinstance(args, list | tuple) or not isinstance(kwargs, dict):
        return None
    texts = args[0] if args else kwargs.get("texts")
    if not isinstance(texts, list) or not texts or not all(isinstance(text, str) and text.strip() for text in texts):
        return None
    normalize: Any = True
    if request.name == EMBED_TASK:
        normalize = args[1] if len(args) > 1 else kwargs.get("normalize", True)
        if not isinstance(normalize, bool):
            return None
    return PlannedEncode(request.id, texts, normalize)
