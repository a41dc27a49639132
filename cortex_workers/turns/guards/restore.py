"""Stream a guarded call's answer: placeholders restored before the text is shown (a split
one held back until complete), frugal's marker never shown, and an escalation to the full
model (the fast call's text withdrawn with `step_restart`) recorded on the step."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

from ...messages import (
    Completion,
    CompletionBuilder,
    ModelRequest,
    TextDelta,
    ToolCall,
    WarningEvent,
)
from ...privacy import Restorer, restore_text, restore_value
from ...providers.registry import Route
from ...runtime import Runtime
from ...store.step_record_rows import AuditRow
from ...vocabulary import DecisionKind
from ..guards.budget import Admitted
from ..observe import model_call
from ..step_record import StepRecord
from .frugal import MARKER, MarkerFilter, escalation_reason
from .route import CallPlan, provider_for, route_record

ESCALATION_REFUSED = "frugal_escalation_refused"


@dataclass(frozen=True, slots=True)
class CallTime:
    """How long one provider call took, from the request to its last event."""

    provider: str
    model: str
    """As metrics name it (`ProviderRegistry.metric_model`): `other` for a name outside the
    catalog and the configuration, which gets no samples of its own."""
    ms: float


@dataclass(frozen=True, slots=True)
class Answered:
    completion: Completion
    """With the original values restored."""
    route: Route
    """The route that answered (frugal: the full model after an escalation)."""
    escalated: str | None = None
    """Frugal: why the fast answer was redone (`output_limit`, `marker`)."""
    billed: Completion | None = None
    """The first call's answer, which the step's reservation pays for (frugal: the fast
    model's, when escalated); None: `completion`."""
    billed_route: Route | None = None
    timings: tuple[CallTime, ...] = ()
    """Each provider call's duration: the step adds them to the measured latency after its
    review judged the answer (`turns.model_step`)."""

    @property
    def first_call(self) -> tuple[Completion, Route]:
        return self.billed or self.completion, self.billed_route or self.route


@dataclass(frozen=True, slots=True)
class Sink:
    """Where the shown text goes, and the step's checks (from the model step)."""

    emit: Callable[[str], None]
    check: Callable[[], None]
    restart: Callable[[], None]


def _restored(completion: Completion, mapping: dict[str, str]) -> Completion:
    text = completion.text
    if MARKER in text:
        text = text[: text.index(MARKER)]
    calls = [
        ToolCall(c.id, c.name, restore_value(c.arguments, mapping)) for c in completion.tool_calls
    ]
    return replace(completion, text=restore_text(text, mapping), tool_calls=calls)


def record_timings(rt: Runtime, timings: tuple[CallTime, ...]) -> None:
    """The calls' durations, into this process's samples (written within a second, with
    the other steps' in one round trip: `providers.latency.LatencyRecorder`)."""
    for t in timings:
        if t.model != "other":
            rt.latency.add(t.provider, t.model, t.ms)


def call_provider(
    rt: Runtime,
    route: Route,
    request: ModelRequest,
    mapping: dict[str, str],
    sink: Sink,
    marker: MarkerFilter | None = None,
) -> tuple[Completion, CallTime]:
    """One provider call, streamed through the marker filter and the restorer, and how long
    it took."""
    provider = provider_for(rt, route, request)
    restorer, out, started = Restorer(mapping), CompletionBuilder(), time.monotonic()

    def show(text: str) -> None:
        shown = restorer.feed(marker.feed(text) if marker else text)
        if shown:
            sink.emit(shown)

    label = rt.providers.metric_model(route.provider, route.model)
    with model_call(route, request, label=label) as call:
        for event in provider.stream(request):
            sink.check()
            out.add(event)
            if isinstance(event, TextDelta):
                call.first_token()
                show(event.text)
        show(marker.flush() if marker else "")
        if tail := restorer.flush():
            sink.emit(tail)
        completion = out.completion  # as the provider wrote it: spans never see the values
        price = rt.providers.price(route.provider, route.model)
        call.answered(completion, price.cost(completion.input_tokens, completion.output_tokens))
    took = CallTime(route.provider, label, (time.monotonic() - started) * 1000)
    return _restored(completion, mapping), took


class Funds(Protocol):
    """The step's budget, for a second call of the attempt (frugal's escalation)."""

    def more(self, route: Route, request: ModelRequest) -> Admitted | None:
        """Hold the second call; None when the budget cannot take it."""

    def paid(self, admitted: Admitted, answered: tuple[Completion, Route] | None) -> None:
        """Record what the call cost (None: it did not finish)."""


def stream_answer(
    rt: Runtime, plan: CallPlan, sink: Sink, *, record: StepRecord, funds: Funds
) -> Answered:
    """The plan's call; in frugal mode, the escalation to the full model when needed."""
    if plan.full is None or plan.full_request is None:
        completion, took = call_provider(rt, plan.route, plan.request, plan.restore, sink)
        return Answered(completion, plan.route, timings=(took,))
    marker = MarkerFilter()
    fast, took = call_provider(rt, plan.route, plan.request, plan.restore, sink, marker)
    why = escalation_reason(fast, marker.seen)
    if why is None:
        return Answered(fast, plan.route, timings=(took,))
    extra = funds.more(plan.full, plan.full_request)
    if extra is None:  # the budget cannot take a second call: the fast answer stands
        refused = WarningEvent(
            ESCALATION_REFUSED, "frugal: no budget left to redo the answer on the full model"
        )
        warned = replace(fast, warnings=[*fast.warnings, refused])
        return Answered(warned, plan.route, timings=(took,))
    sink.restart()
    _record_escalation(rt, plan, fast, why, record)
    answered: tuple[Completion, Route] | None = None
    try:
        full, took_full = call_provider(rt, plan.full, plan.full_request, plan.restore, sink)
        answered = (full, plan.full)
    finally:
        funds.paid(extra, answered)
    return Answered(
        full, plan.full, why, billed=fast, billed_route=plan.route, timings=(took, took_full)
    )


def _record_escalation(
    rt: Runtime, plan: CallPlan, fast: Completion, why: str, record: StepRecord
) -> None:
    """The fast call's audit row (its tokens were spent too) and the escalation on the step."""
    assert plan.full is not None
    price = rt.providers.price(plan.route.provider, plan.route.model)
    record.audit(
        AuditRow(
            DecisionKind.MODEL,
            f"{plan.route.provider}:{plan.route.model}",
            input={
                "messages": len(plan.request.messages),
                "tools": [t.name for t in plan.request.tools],
            },
            output={
                "text_chars": len(fast.text),
                "tool_calls": len(fast.tool_calls),
                "input_tokens": fast.input_tokens,
                "output_tokens": fast.output_tokens,
            },
        )
    )
    route = route_record(plan) or {}
    route["escalation"] = {
        "from": f"{plan.route.provider}:{plan.route.model}",
        "to": f"{plan.full.provider}:{plan.full.model}",
        "why": why,
        "fast_input_tokens": fast.input_tokens,
        "fast_output_tokens": fast.output_tokens,
        "fast_cost_usd": price.cost(fast.input_tokens, fast.output_tokens),
    }
    record.routed(route, plan.redactions)
