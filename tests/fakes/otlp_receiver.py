"""A local OTLP/HTTP trace receiver: what an OpenTelemetry collector would see from our processes.

`OtlpReceiver` runs `http.server.ThreadingHTTPServer` on 127.0.0.1 (ephemeral port) in a daemon
thread, accepts `POST /v1/traces` (protobuf, optionally gzip-compressed), decodes each request
with the OTLP protobuf classes and keeps every span as a `ReceivedSpan`. Point a process at it
with `OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint`; then `wait_for(predicate)` returns the
spans once the predicate holds on them::

    with OtlpReceiver() as receiver:
        ...  # start a process with receiver.env()
        spans = receiver.wait_for(lambda spans: any(s.name == "chat m" for s in spans))
"""

from __future__ import annotations

import gzip
import threading
import time
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

AttributeValue = str | bool | int | float | bytes | list["AttributeValue"] | None

KINDS = {
    Span.SPAN_KIND_UNSPECIFIED: "unspecified",
    Span.SPAN_KIND_INTERNAL: "internal",
    Span.SPAN_KIND_SERVER: "server",
    Span.SPAN_KIND_CLIENT: "client",
    Span.SPAN_KIND_PRODUCER: "producer",
    Span.SPAN_KIND_CONSUMER: "consumer",
}
STATUSES = {
    Status.STATUS_CODE_UNSET: "unset",
    Status.STATUS_CODE_OK: "ok",
    Status.STATUS_CODE_ERROR: "error",
}


@dataclass(frozen=True)
class ReceivedLink:
    """A span link: the trace and span it points at (hex)."""

    trace_id: str
    span_id: str


@dataclass(frozen=True)
class ReceivedEvent:
    """A span event, such as the `exception` event of a recorded error."""

    name: str
    attributes: Mapping[str, AttributeValue]


@dataclass(frozen=True)
class ReceivedSpan:
    """One exported span, ids as lower-case hex as in a `traceparent`."""

    name: str
    kind: str
    """internal, server, client, producer or consumer."""
    trace_id: str
    span_id: str
    parent_span_id: str | None
    attributes: Mapping[str, AttributeValue]
    status: str
    """unset, ok or error."""
    status_message: str
    links: tuple[ReceivedLink, ...]
    events: tuple[ReceivedEvent, ...]
    resource: Mapping[str, AttributeValue]
    """The resource attributes of the process that sent it (`service.name`, ...)."""


def _value(value: AnyValue) -> AttributeValue:
    match value.WhichOneof("value"):
        case "string_value":
            return value.string_value
        case "bool_value":
            return value.bool_value
        case "int_value":
            return value.int_value
        case "double_value":
            return value.double_value
        case "bytes_value":
            return value.bytes_value
        case "array_value":
            return [_value(item) for item in value.array_value.values]
        case _:
            return None


def _attributes(pairs: list[KeyValue]) -> dict[str, AttributeValue]:
    return {pair.key: _value(pair.value) for pair in pairs}


def decode(body: bytes) -> list[ReceivedSpan]:
    """The spans of one serialized `ExportTraceServiceRequest`."""
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    spans: list[ReceivedSpan] = []
    for resource_spans in request.resource_spans:
        resource = _attributes(list(resource_spans.resource.attributes))
        for scope_spans in resource_spans.scope_spans:
            spans.extend(_span(span, resource) for span in scope_spans.spans)
    return spans


def _span(span: Span, resource: Mapping[str, AttributeValue]) -> ReceivedSpan:
    return ReceivedSpan(
        name=span.name,
        kind=KINDS.get(span.kind, str(span.kind)),
        trace_id=span.trace_id.hex(),
        span_id=span.span_id.hex(),
        parent_span_id=span.parent_span_id.hex() or None,
        attributes=_attributes(list(span.attributes)),
        status=STATUSES.get(span.status.code, str(span.status.code)),
        status_message=span.status.message,
        links=tuple(ReceivedLink(link.trace_id.hex(), link.span_id.hex()) for link in span.links),
        events=tuple(
            ReceivedEvent(event.name, _attributes(list(event.attributes))) for event in span.events
        ),
        resource=resource,
    )


class OtlpReceiver:
    """Receives OTLP/HTTP trace exports on 127.0.0.1 and keeps the spans."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._spans: list[ReceivedSpan] = []
        self.requests = 0
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        """The base URL for `OTEL_EXPORTER_OTLP_ENDPOINT` (the exporter appends `/v1/traces`)."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def env(self) -> dict[str, str]:
        """Variables that send a process's traces here quickly."""
        return {
            "OTEL_EXPORTER_OTLP_ENDPOINT": self.endpoint,
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_BSP_SCHEDULE_DELAY": "50",
        }

    def start(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> OtlpReceiver:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def spans(self) -> list[ReceivedSpan]:
        """Every span received so far, in arrival order."""
        with self._lock:
            return list(self._spans)

    def clear(self) -> None:
        with self._lock:
            self._spans.clear()

    def wait_for(
        self, predicate: Callable[[list[ReceivedSpan]], bool], timeout: float = 10.0
    ) -> list[ReceivedSpan]:
        """The spans received, once `predicate(spans)` holds; AssertionError after `timeout`."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not predicate(list(self._spans)):
                left = deadline - time.monotonic()
                if left <= 0:
                    names = [span.name for span in self._spans]
                    raise AssertionError(f"spans never matched within {timeout}s; got {names}")
                self._changed.wait(left)
            return list(self._spans)

    def _receive(self, spans: list[ReceivedSpan]) -> None:
        with self._changed:
            self.requests += 1
            self._spans.extend(spans)
            self._changed.notify_all()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                if self.path.rstrip("/") != "/v1/traces":
                    self.send_error(404, "only /v1/traces is received here")
                    return
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                match self.headers.get("Content-Encoding", "").lower():
                    case "gzip":
                        body = gzip.decompress(body)
                    case "deflate":
                        body = zlib.decompress(body)
                receiver._receive(decode(body))
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: object) -> None:
                pass

        return Handler
