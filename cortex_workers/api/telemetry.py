"""Every API request measured and, with tracing on, traced: a pure ASGI middleware.

`http_server_request_duration_seconds` is labelled by the route template (`/v1/turns/{turn_id}`),
never the raw path, so ids make no series; a path no route matches is labelled `unmatched`. It
measures the whole response, except for Server-Sent Events, where it stops at the response's
start (a stream stays open for as long as its client wants).

With tracing on (docs/operations.md), each request is a SERVER span following the OpenTelemetry
HTTP conventions, named `{method} {route}`, the child of an incoming W3C `traceparent` when the
request sends one. It covers the whole response, streams included; a 5xx marks it failed. The
probes and the scrape (`/healthz`, `/readyz`, `/metrics`) are measured but not traced: they
would bury the turns' traces. While tracing is off a request costs two clock reads, one dict
lookup and one histogram observation.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from opentelemetry.trace import INVALID_SPAN, Span, SpanKind, Status, StatusCode
from prometheus_client import Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..observability import metrics, tracing

UNMATCHED = "unmatched"
"""The `http_route` of a request no route matched: a 404 for an unknown path, or a body refused
for its declared size before routing (413)."""
OTHER_METHOD = "_OTHER"
"""The `http_request_method` of a method outside HTTP's own set: clients cannot make series."""
KNOWN_METHODS = frozenset(
    {"CONNECT", "DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT", "QUERY", "TRACE"}
)
UNTRACED_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
_EVENT_STREAM = b"text/event-stream"

_series: dict[tuple[str, str, int], Histogram] = {}
"""Each (route, method, status) histogram child once looked up: bounded by the routes, the
known methods and the status codes."""


def _observe(route: str, method: str, status: int, seconds: float) -> None:
    key = (route, method, status)
    series = _series.get(key)
    if series is None:
        series = _series[key] = metrics.HTTP_DURATION.labels(route, method, str(status))
    series.observe(seconds)


def route_of(scope: Scope) -> str:
    """The template of the route that handled the request, or `UNMATCHED`."""
    route = scope.get("route")  # set by FastAPI's routes when they match
    template = getattr(route, "path_format", None) or getattr(route, "path", None)
    if isinstance(template, str):
        return template
    endpoint = scope.get("endpoint")  # a plain Starlette route: the docs pages
    app = scope.get("app")
    if endpoint is not None and app is not None:
        for candidate in getattr(app, "routes", ()):
            if getattr(candidate, "endpoint", None) is endpoint:
                return str(getattr(candidate, "path", UNMATCHED))
    return UNMATCHED


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers") or ():
        if key == name:
            return bytes(value).decode("latin-1")
    return None


def _is_event_stream(message: Message) -> bool:
    for key, value in message.get("headers") or ():
        if key.lower() == b"content-type":
            return bytes(value).startswith(_EVENT_STREAM)
    return False


@dataclass(slots=True)
class _Exchange:
    """One request as the middleware sees it go by."""

    started: float
    method: str
    status: int = 500
    """The response's status; 500 until it starts (an exception before it is answered 500)."""
    observed: bool = False
    """The histogram has the request (an event stream's, at its start)."""


class RequestTelemetry:
    """The HTTP duration histogram for every request and, with tracing on, a SERVER span."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method = scope["method"]
        exchange = _Exchange(
            time.perf_counter(), method if method in KNOWN_METHODS else OTHER_METHOD
        )

        async def timed_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                exchange.status = message["status"]
                if _is_event_stream(message):
                    self._finish(scope, exchange)
            await send(message)

        try:
            if not tracing.tracing_enabled() or scope["path"] in UNTRACED_PATHS:
                await self.app(scope, receive, timed_send)
            else:
                await self._traced(scope, receive, timed_send, exchange)
        finally:
            self._finish(scope, exchange)

    def _finish(self, scope: Scope, exchange: _Exchange) -> None:
        if not exchange.observed:
            exchange.observed = True
            seconds = time.perf_counter() - exchange.started
            _observe(route_of(scope), exchange.method, exchange.status, seconds)

    async def _traced(
        self, scope: Scope, receive: Receive, send: Send, exchange: _Exchange
    ) -> None:
        request_span = tracing.span_from_traceparent(
            _span_name(exchange.method),
            _header(scope, b"traceparent"),
            kind=SpanKind.SERVER,
            attributes=_request_attributes(scope, exchange.method),
        )
        with request_span as span:
            try:
                await self.app(scope, receive, send)
            finally:
                _end_attributes(span, scope, exchange)


def _request_attributes(scope: Scope, method: str) -> dict[str, str | int]:
    """The conventions' request attributes known before routing."""
    attributes: dict[str, str | int] = {
        "http.request.method": method,
        "url.path": scope["path"],
        "url.scheme": scope.get("scheme", "http"),
    }
    if method == OTHER_METHOD:
        attributes["http.request.method_original"] = scope["method"]
    host = _header(scope, b"host")
    server = scope.get("server")
    if host:
        attributes |= _address(host)
    elif server:
        attributes["server.address"] = str(server[0])
        if server[1] is not None:
            attributes["server.port"] = int(server[1])
    return attributes


def _address(host: str) -> dict[str, str | int]:
    """`server.address` and, when the Host header names one, `server.port`."""
    name, colon, port = host.rpartition(":")
    if not colon or not port.isdigit():  # no port, or an IPv6 address without one
        return {"server.address": host.strip("[]")}
    return {"server.address": name.strip("[]"), "server.port": int(port)}


def _span_name(method: str) -> str:
    return method if method != OTHER_METHOD else "HTTP"


def _end_attributes(span: Span, scope: Scope, exchange: _Exchange) -> None:
    """The route and the status, once the request is answered; a 5xx fails the span."""
    if span is INVALID_SPAN or not span.is_recording():
        return
    route = route_of(scope)
    if route != UNMATCHED:
        span.set_attribute("http.route", route)
        span.update_name(f"{_span_name(exchange.method)} {route}")
    span.set_attribute("http.response.status_code", exchange.status)
    if exchange.status >= 500:
        span.set_attribute("error.type", str(exchange.status))
        span.set_status(Status(StatusCode.ERROR))
