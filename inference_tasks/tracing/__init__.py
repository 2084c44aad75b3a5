"""OpenTelemetry traces: a caller's W3C trace context carried in the message headers (propagation.py,
the producer side), and the worker's spans continuing it (spans.py; worker/lifecycle/task_traces.py). Off unless
the standard OTEL_* variables name an OTLP endpoint (config/settings.py); the SDK is imported only then."""
