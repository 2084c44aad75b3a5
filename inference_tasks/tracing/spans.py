"""The worker side's OpenTelemetry plumbing: the tracer provider a tracing process starts (after any
fork: the SDK's export thread does not survive one), and spans that cost nothing when tracing is off.

"Off" is read from the process itself: a process that never started tracing never imported the SDK,
so `active_tracer` is one dictionary lookup there and every `span` a shared null context. The
provider is OpenTelemetry's own global (the upstream hook every instrumentation reads), exporting over
OTLP/HTTP in batches (OTEL_BSP_* tune them); its service name is OTEL_SERVICE_NAME, else
config.DEFAULT_SERVICE_NAME.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Mapping
from typing import Any

from inference_tasks.tracing.config import DEFAULT_SERVICE_NAME, TRACEPARENT_HEADER, TRACESTATE_HEADER

TRACER_NAME = "inference_tasks"
SDK_MODULE = "opentelemetry.sdk.trace"


def start_tracing(attributes: Mapping[str, Any]) -> Any:
    """Install an SDK tracer provider exporting over OTLP/HTTP, with `attributes` on its resource;
    returns the provider (shut it down to flush)."""
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", DEFAULT_SERVICE_NAME),
                                **attributes})  # fmt: skip
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    return provider


def active_tracer() -> Any:
    """This process's tracer, or None when it does not trace (the SDK was never imported here)."""
    if SDK_MODULE not in sys.modules:
        return None
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    provider = trace.get_tracer_provider()
    return provider.get_tracer(TRACER_NAME) if isinstance(provider, TracerProvider) else None


@contextlib.contextmanager
def _span(tracer: Any, name: str, attributes: Mapping[str, Any]) -> Iterator[Any]:
    with tracer.start_as_current_span(name, attributes=dict(attributes)) as current:
        yield current


def span(name: str, **attributes: Any) -> contextlib.AbstractContextManager[Any]:
    """A span as a child of the current one while the block runs; a null context when not tracing."""
    tracer = active_tracer()
    return contextlib.nullcontext() if tracer is None else _span(tracer, name, attributes)


def carried_context(headers: Any) -> Any:
    """The W3C context a message's headers carry (a request, or a dict), as an OpenTelemetry Context;
    an absent or malformed traceparent gives an empty one (a new trace), as the W3C spec says."""
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier = {}
    for name in (TRACEPARENT_HEADER, TRACESTATE_HEADER):
        value = headers.get(name) if hasattr(headers, "get") else None
        if isinstance(value, str):
            carrier[name] = value
    return TraceContextTextMapPropagator().extract(carrier)


def current_trace_headers() -> dict[str, str]:
    """The current span's context as traceparent/tracestate (for a job sent on), {} when not tracing."""
    if active_tracer() is None:
        return {}
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier)
    return carrier


def nanoseconds(unix_seconds: float) -> int:
    return int(unix_seconds * 1e9)
