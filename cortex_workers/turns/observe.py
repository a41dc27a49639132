"""What a step reports about itself: its span in the turn's trace, the ids on its log lines,
and its share of the metrics (outcome, queue wait, provider calls, tool runs, turn ends).

A handful of metric calls per step, none per streamed token; with tracing off the span helpers
are shared no-ops. See docs/operations.md for the families and the trace shape.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum

from opentelemetry.trace import Span, Status, StatusCode

from ..messages import Completion, ModelRequest
from ..observability import metrics, tracing
from ..observability.logs import log_context
from ..providers.registry import Route
from ..queues import step_route
from ..store.claims import Claim
from ..tools import ToolOutcome
from ..vocabulary import StepKind, StepStatus


class StepOutcome(StrEnum):
    """How one delivery of a step ended, as `cortex_steps_total` counts it."""

    DONE = StepStatus.DONE.value
    RETRIED = "retried"
    FAILED = StepStatus.FAILED.value
    DEFERRED = "deferred"
    """Waiting out a rate limit (the attempt does not count)."""
    PARKED = "parked"
    """A tool call answered with a task: the step waits, held by no worker, for its end."""
    DUPLICATE = "duplicate"
    """The claim returned nothing (another delivery has the step, or its turn has ended), or a
    newer attempt owned the step when this one came to store its result."""


def count_step(kind: StepKind, outcome: StepOutcome) -> None:
    """One delivery of a step of `kind` ended with `outcome`. A delivery cut off by its turn's
    end or a lost lease counts nothing: the delivery that finishes the step does."""
    metrics.count_step(kind, outcome)


@contextmanager
def step_scope(claim: Claim, *, session_id: uuid.UUID | None) -> Iterator[Span]:
    """Around one run of a claimed step: its queue wait observed, its `cortex.step {kind}` span
    a child of the turn's stored traceparent, and its ids on every log line inside."""
    metrics.observe_step_queue_wait(claim.kind, claim.queue_wait_s)
    with (
        log_context(turn_id=claim.turn_id, step_id=claim.step_id, session_id=session_id),
        tracing.step_span(
            claim.kind,
            traceparent=claim.traceparent,
            turn_id=claim.turn_id,
            step_no=claim.step_no,
            attempt=claim.attempt,
            queue=step_route(claim.kind).queue,
        ) as span,
    ):
        yield span


@dataclass(slots=True)
class ModelCall:
    """One provider call being timed: `first_token()` at the first streamed text."""

    route: Route
    span: Span
    started: float
    first_token_at: float | None = None
    label: str | None = None
    """The model as the metrics name it (`ProviderRegistry.metric_model`)."""

    def first_token(self) -> None:
        if self.first_token_at is None:
            self.first_token_at = time.monotonic()

    def answered(self, completion: Completion, cost_usd: float) -> None:
        """The call's metrics and its response on the span."""
        route = self.route
        tracing.record_model_response(
            self.span,
            response_model=route.model,
            input_tokens=completion.input_tokens,
            output_tokens=completion.output_tokens,
            finish_reasons=(completion.finish_reason,),
        )
        if self.span.is_recording() and tracing.trace_content_enabled():
            tracing.record_model_content(self.span, output_messages=json.dumps(completion.text))
        ttft = None if self.first_token_at is None else self.first_token_at - self.started
        metrics.observe_model_call(
            route.provider,
            self.label or route.model,
            seconds=time.monotonic() - self.started,
            input_tokens=completion.input_tokens,
            output_tokens=completion.output_tokens,
            cost_usd=cost_usd,
            ttft_s=ttft,
        )

    def failed(self, exc: BaseException) -> None:
        code = getattr(exc, "code", None)
        metrics.observe_model_call(
            self.route.provider,
            self.label or self.route.model,
            seconds=time.monotonic() - self.started,
            error_type=code if isinstance(code, str) and code else type(exc).__name__,
        )


@contextmanager
def model_call(
    route: Route, request: ModelRequest, *, label: str | None = None
) -> Iterator[ModelCall]:
    """`chat {model}` around one provider call; a fallback route counts as one. `label`: the
    model as the metrics name it (bounded; default the route's model)."""
    if route.fallback_from is not None:
        metrics.count_llm_fallback(route.fallback_from.partition(":")[0], route.provider)
    with tracing.model_call_span(route.provider, route.model) as span:
        if span.is_recording() and tracing.trace_content_enabled():
            prompt = json.dumps([{"role": m.role, "content": m.content} for m in request.messages])
            tracing.record_model_content(span, input_messages=prompt)
        call = ModelCall(route, span, time.monotonic(), label=label)
        try:
            yield call
        except BaseException as exc:
            call.failed(exc)
            raise


@contextmanager
def tool_run(name: str, call_id: str, arguments: Callable[[], str]) -> Iterator[Span]:
    """`execute_tool {name}` around one router call; `arguments` (JSON text) is called only
    when content goes on spans."""
    with tracing.tool_span(name, call_id) as span:
        if span.is_recording() and tracing.trace_content_enabled():
            tracing.record_tool_content(span, arguments=arguments())
        yield span


def tool_ran(span: Span, label: str, outcome: ToolOutcome) -> None:
    """A tool run's outcome on its span (an error sets its status) and in the metrics.
    `label` is the tool's name when it is registered, else `unknown`: a name the model made up
    must not make a series."""
    if span.is_recording():
        if outcome.is_error:
            span.set_status(Status(StatusCode.ERROR, outcome.error or "tool error"))
            span.set_attribute("error.type", outcome.error or "tool_error")
        if tracing.trace_content_enabled():
            tracing.record_tool_content(span, result=outcome.content)
    metrics.count_tool_call(label, outcome.severity, outcome.latency_ms / 1000)
