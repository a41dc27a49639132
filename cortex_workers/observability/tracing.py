"""OpenTelemetry tracing: off unless the standard `OTEL_*` variables ask for it.

`configure_tracing` turns it on when `OTEL_EXPORTER_OTLP_ENDPOINT` (or its `_TRACES_` form) or
`OTEL_TRACES_EXPORTER` is set, and leaves everything else to the SDK's own reading of the
environment: the exporter's endpoint, headers, timeout and compression, `OTEL_BSP_*` for the
batch processor, `OTEL_TRACES_SAMPLER(_ARG)`, `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES`.
`OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` keep it off.

A turn's trace: the API stores `current_traceparent()` with the turn; every step of the turn,
on whichever worker, retried or re-published, runs inside `step_span(...)` started from that
traceparent, so it is a child of the request that created the turn. Provider calls
(`model_call_span`) and tool runs (`tool_span`) are children of their step and carry the
OpenTelemetry GenAI attributes. Prompts, completions and tool arguments are recorded only with
`CORTEX_TRACE_CONTENT=true`. See docs/operations.md. While tracing is off each helper returns a
shared no-op context manager after one check: the hot paths pay well under a microsecond.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING
from uuid import UUID

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import INVALID_SPAN, Link, Span, SpanContext, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import AttributeValue

from .exporters import exporter_names, exporters, resource

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

log = logging.getLogger(__name__)

TRACE_CONTENT_ENV = "CORTEX_TRACE_CONTENT"
_TRUE = frozenset({"1", "true", "yes", "on"})
_PROPAGATOR = TraceContextTextMapPropagator()

Attributes = Mapping[str, AttributeValue]


@dataclass
class _Tracing:
    tracer: trace.Tracer | None = None
    """None while tracing is off: the one check every helper makes first."""
    provider: TracerProvider | None = None
    global_set: bool = False
    """The OpenTelemetry API allows one global provider per process; later ones stay local."""


_STATE = _Tracing()
_LOCK = threading.Lock()


class _NoSpan(AbstractContextManager[Span]):
    """What the span helpers return while tracing is off: enters as the invalid span."""

    __slots__ = ()

    def __enter__(self) -> Span:
        return INVALID_SPAN

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None


_NO_SPAN = _NoSpan()


def tracing_requested(env: Mapping[str, str] = os.environ) -> bool:
    """Whether the standard variables in `env` ask for traces to be exported."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    names = exporter_names(env)
    if names is not None:
        return bool(names)
    return bool(
        env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
        or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    )


def configure_tracing(service_name: str) -> bool:
    """Starts exporting traces when the environment asks for it; returns whether tracing is on.

    Idempotent, and safe in a forked child (a Celery prefork child calls it from
    `worker_process_init`): the SDK restarts its export thread after a fork, so a provider set
    up before the fork keeps working. `service_name` is used unless `OTEL_SERVICE_NAME` or
    `OTEL_RESOURCE_ATTRIBUTES` name the service. Raises ValueError when `OTEL_TRACES_EXPORTER`
    names an exporter no installed package provides.
    """
    with _LOCK:
        if _STATE.tracer is not None:
            return True
        if not tracing_requested():
            return False
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        provider = TracerProvider(resource=resource(service_name))  # sampler: OTEL_TRACES_SAMPLER
        for exporter in exporters():
            provider.add_span_processor(BatchSpanProcessor(exporter))  # reads OTEL_BSP_*
        if not _STATE.global_set:
            trace.set_tracer_provider(provider)
            _STATE.global_set = True
        _STATE.provider = provider
        _STATE.tracer = provider.get_tracer("cortex_workers")
        log.info("tracing on for %s", provider.resource.attributes.get("service.name"))
        return True


SHUTDOWN_EXPORT_S = 5.0


def shutdown_tracing(timeout_s: float = SHUTDOWN_EXPORT_S) -> None:
    """Exports the spans still buffered and stops tracing in this process, waiting at most
    `timeout_s`: a collector that is down or slow (the exporter retries for up to its own
    timeout) must not hold up a process that was told to stop. What could not be sent by then
    is dropped, with a warning."""
    with _LOCK:
        provider, _STATE.provider, _STATE.tracer = _STATE.provider, None, None
    if provider is None:
        return
    # the provider's shutdown drains every batch processor (the final export of each)
    exporting = threading.Thread(target=provider.shutdown, name="tracing-shutdown", daemon=True)
    exporting.start()
    exporting.join(timeout_s)
    if exporting.is_alive():
        log.warning(
            "tracing: the spans still buffered were not exported within %.0f s of shutdown "
            "(is the collector reachable?); they are dropped",
            timeout_s,
        )


def tracing_enabled() -> bool:
    """Whether `configure_tracing` turned tracing on in this process."""
    return _STATE.tracer is not None


def trace_content_enabled() -> bool:
    """Whether prompts, completions and tool arguments may go on spans (`CORTEX_TRACE_CONTENT`)."""
    return os.environ.get(TRACE_CONTENT_ENV, "").strip().lower() in _TRUE


def _span_context(traceparent: str | None) -> SpanContext | None:
    if not traceparent:
        return None
    context = trace.get_current_span(_PROPAGATOR.extract({"traceparent": traceparent}))
    span_context = context.get_span_context()
    return span_context if span_context.is_valid else None


def current_traceparent() -> str | None:
    """The W3C `traceparent` of the current span, to store with a turn; None when there is none
    (tracing off, or outside any span)."""
    if _STATE.tracer is None:
        return None
    span_context = trace.get_current_span().get_span_context()
    if not span_context.is_valid:
        return None
    ids = f"{span_context.trace_id:032x}-{span_context.span_id:016x}"
    return f"00-{ids}-{int(span_context.trace_flags):02x}"


def current_trace_id() -> str | None:
    """The current span's trace id as 32 hex digits, for log lines; None outside any span."""
    span_context = trace.get_current_span().get_span_context()
    return f"{span_context.trace_id:032x}" if span_context.is_valid else None


def span(
    name: str,
    *,
    kind: SpanKind = SpanKind.INTERNAL,
    attributes: Attributes | None = None,
    link: str | None = None,
) -> AbstractContextManager[Span]:
    """A span named `name`, child of the current one; with `link`, linked to that traceparent."""
    if _STATE.tracer is None:
        return _NO_SPAN
    return _scope(name, None, kind, attributes, link)


def span_from_traceparent(
    name: str,
    traceparent: str | None,
    *,
    kind: SpanKind = SpanKind.INTERNAL,
    attributes: Attributes | None = None,
) -> AbstractContextManager[Span]:
    """A span named `name`, child of the span `traceparent` identifies (one stored with a turn);
    a new trace when `traceparent` is None or malformed."""
    if _STATE.tracer is None:
        return _NO_SPAN
    return _scope(name, _parent(traceparent), kind, attributes, None)


def link_to(traceparent: str | None) -> None:
    """Links the current span to the span `traceparent` identifies: an SSE request follows a
    turn this way, instead of adding a child span per chunk to the turn's trace."""
    if _STATE.tracer is None:
        return
    target = _span_context(traceparent)
    if target is not None:
        trace.get_current_span().add_link(target)


def record_error(span: Span, exc: BaseException) -> None:
    """Marks `span` failed by `exc`: status ERROR, `error.type`, and an exception event."""
    if _STATE.tracer is None or not span.is_recording():
        return
    error_type = type(exc).__qualname__
    span.set_status(Status(StatusCode.ERROR, error_type))
    span.set_attribute("error.type", error_type)
    span.record_exception(exc)


def _parent(traceparent: str | None) -> Context:
    target = _span_context(traceparent)
    if target is None:
        return Context()  # a root span: no current span leaks in as the parent
    return trace.set_span_in_context(trace.NonRecordingSpan(target))


@contextmanager
def _scope(
    name: str,
    parent: Context | None,
    kind: SpanKind,
    attributes: Attributes | None,
    link: str | None,
) -> Iterator[Span]:
    tracer = _STATE.tracer
    if tracer is None:  # shut down in between
        yield INVALID_SPAN
        return
    target = _span_context(link)
    links: Sequence[Link] = () if target is None else (Link(target),)
    with tracer.start_as_current_span(
        name,
        context=parent,
        kind=kind,
        attributes=attributes,
        links=links,
        record_exception=False,
        set_status_on_exception=False,
    ) as current:
        try:
            yield current
        except Exception as exc:
            record_error(current, exc)
            raise


def step_span(
    kind: str,
    *,
    traceparent: str | None,
    turn_id: UUID | str,
    step_no: int,
    attempt: int,
    queue: str,
) -> AbstractContextManager[Span]:
    """`cortex.step {kind}`: one run of a step, a child of its turn's stored `traceparent`."""
    if _STATE.tracer is None:
        return _NO_SPAN
    attributes: dict[str, AttributeValue] = {
        "cortex.turn_id": str(turn_id),
        "cortex.step_no": step_no,
        "cortex.attempt": attempt,
        "messaging.destination.name": str(queue),
    }
    return _scope(f"cortex.step {kind}", _parent(traceparent), SpanKind.CONSUMER, attributes, None)


def model_call_span(provider: str, model: str) -> AbstractContextManager[Span]:
    """`chat {model}`: one provider call (OpenTelemetry GenAI client span)."""
    if _STATE.tracer is None:
        return _NO_SPAN
    attributes: dict[str, AttributeValue] = {"gen_ai.operation.name": "chat"}
    attributes |= {"gen_ai.provider.name": str(provider), "gen_ai.request.model": str(model)}
    return _scope(f"chat {model}", None, SpanKind.CLIENT, attributes, None)


def record_model_response(
    span: Span,
    *,
    response_model: str | None = None,
    input_tokens: int | None = None,
    output_tokens: int | None = None,
    finish_reasons: Sequence[str] = (),
) -> None:
    """What the provider answered, on the `model_call_span`."""
    if _STATE.tracer is None or not span.is_recording():
        return
    if response_model:
        span.set_attribute("gen_ai.response.model", str(response_model))
    if input_tokens is not None:
        span.set_attribute("gen_ai.usage.input_tokens", input_tokens)
    if output_tokens is not None:
        span.set_attribute("gen_ai.usage.output_tokens", output_tokens)
    if finish_reasons:
        span.set_attribute("gen_ai.response.finish_reasons", [str(r) for r in finish_reasons])


def record_model_content(
    span: Span, *, input_messages: str | None = None, output_messages: str | None = None
) -> None:
    """The prompt and completion (JSON text) on the `model_call_span`, only when
    `CORTEX_TRACE_CONTENT=true`: otherwise they never leave the database."""
    if _STATE.tracer is None or not span.is_recording() or not trace_content_enabled():
        return
    if input_messages is not None:
        span.set_attribute("gen_ai.input.messages", input_messages)
    if output_messages is not None:
        span.set_attribute("gen_ai.output.messages", output_messages)


def tool_span(name: str, call_id: str) -> AbstractContextManager[Span]:
    """`execute_tool {name}`: one tool run (OpenTelemetry GenAI tool span)."""
    if _STATE.tracer is None:
        return _NO_SPAN
    attributes: dict[str, AttributeValue] = {"gen_ai.operation.name": "execute_tool"}
    attributes |= {"gen_ai.tool.name": str(name), "gen_ai.tool.call.id": str(call_id)}
    return _scope(f"execute_tool {name}", None, SpanKind.INTERNAL, attributes, None)


def record_tool_content(
    span: Span, *, arguments: str | None = None, result: str | None = None
) -> None:
    """A tool's arguments and result (JSON text) on the `tool_span`, only when
    `CORTEX_TRACE_CONTENT=true`."""
    if _STATE.tracer is None or not span.is_recording() or not trace_content_enabled():
        return
    if arguments is not None:
        span.set_attribute("gen_ai.tool.call.arguments", arguments)
    if result is not None:
        span.set_attribute("gen_ai.tool.call.result", result)
