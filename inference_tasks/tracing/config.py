"""Whether this process traces, read from the standard OpenTelemetry variables, and the header names.

Tracing is off unless an OTLP endpoint is configured (OTEL_EXPORTER_OTLP_ENDPOINT or
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), and OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none turn it off
again: a fleet that sets nothing pays nothing (the SDK is never imported). Everything else (service
name, sampling, headers, timeouts, batching) is the SDK's own OTEL_* configuration.

Producer-safe: stdlib only.
"""

from __future__ import annotations

from collections.abc import Mapping

ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
DEFAULT_SERVICE_NAME = "inference-tasks-worker"
# W3C Trace Context, as message headers (Celery's, and the Ruby client's), beside the send stamp.
TRACEPARENT_HEADER = "traceparent"
TRACESTATE_HEADER = "tracestate"
# Stamped by a tracing worker's main process on each message it takes (Unix seconds): when the take
# returned it and when screening let it through. The child that runs the task turns them into spans.
TAKEN_AT_HEADER = "inference_taken_at"
ADMITTED_AT_HEADER = "inference_admitted_at"


def tracing_configured(environ: Mapping[str, str]) -> bool:
    """True when the OTEL_* variables ask for traces to be exported over OTLP."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() == "none":
        return False
    return any(environ.get(name, "").strip() for name in ENDPOINT_VARIABLES)
