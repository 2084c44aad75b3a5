"""An OTLP/HTTP trace receiver for the tests: what a collector does with POST /v1/traces (protobuf),
decoded with opentelemetry-proto, on loopback. Spans are kept as plain dicts."""

from __future__ import annotations

import gzip
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


def _span(span: Any, resource: dict[str, Any]) -> dict[str, Any]:
    return {
        "trace_id": span.trace_id.hex(),
        "span_id": span.span_id.hex(),
        "parent_span_id": span.parent_span_id.hex(),
        "name": span.name,
        "kind": span.kind,
        "start": span.start_time_unix_nano,
        "end": span.end_time_unix_nano,
        "attributes": {attribute.key: _value(attribute.value) for attribute in span.attributes},
        "links": [(link.trace_id.hex(), link.span_id.hex()) for link in span.links],
        "status": span.status.code,
        "resource": resource,
    }


@dataclass
class Receiver:
    """The spans received so far, and the address exporters send to (OTEL_EXPORTER_OTLP_ENDPOINT)."""

    server: ThreadingHTTPServer
    spans: list[dict[str, Any]] = field(default_factory=list)
    requests: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def endpoint(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def add(self, body: bytes) -> None:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        with self.lock:
            self.requests += 1
            for resource_spans in request.resource_spans:
                resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
                for scope_spans in resource_spans.scope_spans:
                    self.spans.extend(_span(span, resource) for span in scope_spans.spans)

    def of_trace(self, trace_id: str) -> list[dict[str, Any]]:
        with self.lock:
            return [span for span in self.spans if span["trace_id"] == trace_id]

    def by_id(self, span_id: str) -> dict[str, Any] | None:
        with self.lock:
            return next((span for span in self.spans if span["span_id"] == span_id), None)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def start_receiver() -> Receiver:
    holder: dict[str, Receiver] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            if self.path != "/v1/traces":
                self.send_response(404)
                self.end_headers()
                return
            holder["receiver"].add(body)
            reply = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver = holder["receiver"] = Receiver(server)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return receiver
