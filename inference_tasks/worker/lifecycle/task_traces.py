"""Each task's trace in a tracing worker: its span continues the caller's (the message's traceparent),
with what happened before the child got it as spans of their own, and every log line inside it
carrying its trace id.

The worker's main process takes, screens and holds a message, but exports nothing: it stamps when
it took the message and when screening let it through (tracing.config.TAKEN_AT_HEADER and
ADMITTED_AT_HEADER, broker/admission.py) and the child that runs the task turns the stamps into spans
with those times. So one process per task exports its whole story:

    inference.embed (CONSUMER; parent: the caller's span)   from the send stamp to the task's end
      queue wait        send stamp -> the take
      screening         the take -> admitted
      micro-batch wait  admitted -> the child starts it (held for batch-mates, and the hand-off)
      forward pass      the task's own encode; a micro-batched task links to its batch's pass instead
      result store      the result written (and the reply job pushed: "reply job")

A micro-batch's shared encode is one "forward pass" span (batch_job.py), linked from every task in
it. Started per child at worker_process_init (signals.py) when tracing.config.tracing_configured.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any

from inference_tasks.routing import SENT_AT_HEADER, TENANT_HEADER
from inference_tasks.tracing.config import ADMITTED_AT_HEADER, TAKEN_AT_HEADER
from inference_tasks.tracing.spans import active_tracer, carried_context, nanoseconds, start_tracing

logger = logging.getLogger(__name__)
# The longest an exiting child waits for its last spans to leave (an unreachable collector must not
# hold up a recycle or a shutdown).
FLUSH_TIMEOUT_MS = 2000


@dataclass
class TaskTraces:
    """A tracing process's provider and the spans of the tasks it is running, by task id."""

    provider: Any
    running: dict[str, tuple[Any, Any]] = field(default_factory=dict)

    def flush(self) -> None:
        """Export what is buffered (a child about to exit), waiting at most FLUSH_TIMEOUT_MS."""
        try:
            self.provider.force_flush(FLUSH_TIMEOUT_MS)
        except Exception:  # an exporter problem must not change how a child ends
            logger.warning("could not flush the last spans", exc_info=True)


def start(attributes: dict[str, Any]) -> TaskTraces:
    """Start exporting from this process, and put each task's trace id on its log lines."""
    traces = TaskTraces(start_tracing({"process.pid": os.getpid(), **attributes}))
    label_log_lines_with_trace_ids()
    return traces


def label_log_lines_with_trace_ids() -> None:
    """Every log record made inside a span starts with `trace_id=<32 hex digits> ` (and carries
    `trace_id` as an attribute for structured handlers); records outside one are untouched."""
    from opentelemetry import trace

    make_record = logging.getLogRecordFactory()

    def record_with_trace_id(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make_record(*args, **kwargs)
        context = trace.get_current_span().get_span_context()
        if context.is_valid:
            trace_id = format(context.trace_id, "032x")
            record.__dict__["trace_id"] = trace_id
            if isinstance(record.msg, str):
                record.msg = f"trace_id={trace_id} {record.msg}"
        return record

    logging.setLogRecordFactory(record_with_trace_id)


def _stamp(request: Any, name: str) -> float | None:
    value = request.get(name) if hasattr(request, "get") else None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) and value > 0 else None


def task_started(traces: TaskTraces, task_name: str, request: Any, shared: Any) -> None:
    """Open the task's span (the current one while it runs) and record the spans before it.
    `shared`: the task's micro-batch share (models.PreEncoded), None when it runs alone."""
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.trace import Link, SpanKind

    tracer = active_tracer()
    if tracer is None or not getattr(request, "id", None):
        return
    now = time.time()
    began = shared.started_at if shared is not None and shared.started_at else now
    # Each step's start, in order; a stamp missing or out of order (another host's clock) is skipped.
    steps = [("queue wait", _stamp(request, SENT_AT_HEADER)), ("screening", _stamp(request, TAKEN_AT_HEADER)),
             ("micro-batch wait", _stamp(request, ADMITTED_AT_HEADER))]  # fmt: skip
    known = [(name, at) for name, at in steps if at is not None and at <= began]
    known = [step for index, step in enumerate(known) if all(step[1] <= later for _, later in known[index + 1 :])]
    link = getattr(shared, "trace_link", None)
    queue = (getattr(request, "delivery_info", None) or {}).get("routing_key", "")
    attributes = {"celery.task_id": request.id, "messaging.system": "redis", "messaging.destination.name": queue,
                  "inference.micro_batched": shared is not None}  # fmt: skip
    tenant = request.get(TENANT_HEADER) if hasattr(request, "get") else None
    if isinstance(tenant, str) and tenant:
        attributes["inference.tenant"] = tenant  # the gateway's tenant: whose work this was
    root = tracer.start_span(
        task_name, context=carried_context(request), kind=SpanKind.CONSUMER,
        start_time=nanoseconds(known[0][1] if known else now), links=[Link(link)] if link is not None else None,
        attributes=attributes,
    )  # fmt: skip
    inside = trace.set_span_in_context(root)
    ends = [at for _, at in known[1:]] + [began]
    for (name, start), end in zip(known, ends, strict=True):
        tracer.start_span(name, context=inside, start_time=nanoseconds(start)).end(end_time=nanoseconds(end))
    traces.running[request.id] = (root, otel_context.attach(inside))


def task_finished(traces: TaskTraces, task_id: str | None, state: str | None) -> None:
    """Close the task's span (after its result was stored), with its final state."""
    from opentelemetry import context as otel_context
    from opentelemetry.trace import Status, StatusCode

    opened = traces.running.pop(task_id or "", None)
    if opened is None:
        return
    root, token = opened
    root.set_attribute("celery.state", state or "")
    if state == "FAILURE":
        root.set_status(Status(StatusCode.ERROR))
    otel_context.detach(token)
    root.end()


def start_pass_span(texts: int, tasks: int) -> Any:
    """A micro-batch's shared forward pass as a span of its own (its tasks link to it), or None."""
    tracer = active_tracer()
    if tracer is None:
        return None
    from opentelemetry import context as otel_context

    return tracer.start_span(
        "forward pass", context=otel_context.Context(),
        attributes={"inference.texts": texts, "inference.tasks": tasks, "inference.micro_batch": True},
    )  # fmt: skip
