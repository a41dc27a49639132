"""`python -m scripts.bench.otlp_sink --port N`: a loopback OTLP/HTTP trace receiver that
accepts every export and counts it, for the observability benchmark.

`POST /v1/traces` (protobuf, gzip or not) is answered 200 with an empty export response, as a
collector would, so the exporters in the stack pay their real cost (serialising, the HTTP round
trip); the spans are decoded only to be counted. `GET /stats` returns the counts as JSON.
It runs in a process of its own so that decoding does not compete with the benchmark's client.
"""

from __future__ import annotations

import argparse
import gzip
import json
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar


def count_spans(body: bytes) -> int:
    """Spans in an OTLP `ExportTraceServiceRequest`; -1 when it does not decode."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
    except Exception:
        return -1
    return sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans)


class Counts:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests = 0
        self.spans = 0
        self.bytes = 0
        self.undecoded = 0

    def add(self, size: int, spans: int) -> None:
        with self.lock:
            self.requests += 1
            self.bytes += size
            if spans < 0:
                self.undecoded += 1
            else:
                self.spans += spans

    def as_json(self) -> bytes:
        with self.lock:
            doc = {
                "requests": self.requests,
                "spans": self.spans,
                "bytes": self.bytes,
                "undecoded": self.undecoded,
            }
        return json.dumps(doc).encode()


class Handler(BaseHTTPRequestHandler):
    counts: ClassVar[Counts] = Counts()
    protocol_version = "HTTP/1.1"  # keep-alive, as the exporter's session expects

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        if self.path.rstrip("/") != "/v1/traces":
            self._reply(404, b"", "text/plain")
            return
        encoding = (self.headers.get("Content-Encoding") or "").lower()
        if encoding == "gzip":
            body = gzip.decompress(body)
        elif encoding == "deflate":
            body = zlib.decompress(body)
        self.counts.add(length, count_spans(body))
        self._reply(200, b"", "application/x-protobuf")

    def do_GET(self) -> None:
        if self.path == "/stats":
            self._reply(200, self.counts.as_json(), "application/json")
        else:
            self._reply(404, b"", "text/plain")

    def _reply(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass  # one line per export would be most of the benchmark's log


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m scripts.bench.otlp_sink")
    p.add_argument("--port", type=int, required=True)
    args = p.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    print(f"OTLP sink on http://127.0.0.1:{args.port}/v1/traces ready.", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
