"""The hand-off between the two sides of micro-batching: what each task of a batch will encode.

The worker's main process (batcher.py) plans it from each request's arguments; the child that
runs the batch (batch_job.py) encodes the plans together. Neither side imports the other's code
for it, so the two stay one-directional: batcher -> batch_job, both -> plan.
"""

from __future__ import annotations

from typing import Any

from inference_tasks.config.catalogue import ModelEntry
from inference_tasks.contract.specs import SPECS
from inference_tasks.validation import InvalidInput
from inference_tasks.worker.kinds.registry import kind_of
from inference_tasks.worker.kinds.shared_pass import PlannedEncode

# A batch job's outcome for a task the child did not run because its recycle limit was spent
# (recycling.py); the main process sends that task on as a job of its own.
NOT_RUN = "inference-tasks:not-run:recycling"


def planned_encode(request: Any, entry: ModelEntry) -> PlannedEncode | None:
    """The encode a task of ours will need (`entry`: the model served), or None when its arguments are
    not plainly valid or the model's kind computes nothing shareable for it.

    The call is bound to names by the task's spec (contract/specs.py), as the task will bind it; the
    model's kind (worker/kinds/) then plans it, checking only the shape (a list of non-empty strings,
    a boolean flag, a known prompt): the task validates everything again in the child, and a task
    planned as None runs there on its own and fails with the task's own message. The batch never
    depends on a bad task.
    """
    args, kwargs, spec = request.args, request.kwargs, SPECS.get(request.name)
    if spec is None or not isinstance(args, list | tuple) or not isinstance(kwargs, dict):
        return None
    try:
        call = spec.bind(args, kwargs)
    except InvalidInput:
        return None
    return kind_of(entry).plan(request.name, request.id, call, entry)
