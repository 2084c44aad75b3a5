"""The producer side: the caller's current W3C trace context into each task message's headers.

Celery's public before_task_publish signal (as redis_access/sent_at.py) adds `traceparent` and
`tracestate` from OpenTelemetry's propagator when the calling process has a valid current span. A
process that never imported OpenTelemetry has no trace to continue, so the check costs one dictionary
lookup and imports nothing. Headers the caller set itself (a traceparent forwarded by hand) are kept.
"""

from __future__ import annotations

import sys
from typing import Any

from celery.signals import before_task_publish

from inference_tasks.tracing.config import TRACEPARENT_HEADER


def inject_trace_context(headers: dict[str, Any] | None = None, **_: Any) -> None:
    if headers is None or TRACEPARENT_HEADER in headers or "opentelemetry.trace" not in sys.modules:
        return
    from opentelemetry import trace

    if not trace.get_current_span().get_span_context().is_valid:
        return  # redis-py 8 imports the API itself: a loaded module is not yet a trace
    from opentelemetry import propagate  # the application's propagators (OTEL_PROPAGATORS), loaded once

    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    headers.update({name: value for name, value in carrier.items() if name in ("traceparent", "tracestate")})


def connect() -> None:
    """Idempotent: Celery's signals are process-wide."""
    before_task_publish.connect(inject_trace_context, weak=False, dispatch_uid="inference_tasks.trace_context")
