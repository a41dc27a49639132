"""With tracing off: what the helpers return, and what a disabled step span costs (ns/call)."""

from __future__ import annotations

import json
import timeit

from opentelemetry.trace import INVALID_SPAN

from cortex_workers.observability import tracing


def disabled_step_span() -> None:
    with tracing.step_span(
        "model", traceparent=None, turn_id="t", step_no=1, attempt=1, queue="llm"
    ) as span:
        tracing.record_model_response(span, input_tokens=1)


configured = tracing.configure_tracing("cortex-off-test")
with tracing.span("request") as outer:
    traceparent = tracing.current_traceparent()
with tracing.model_call_span("scripted", "m1") as call, tracing.tool_span("echo", "c1") as run:
    helpers_no_op = call is INVALID_SPAN and run is INVALID_SPAN and outer is INVALID_SPAN
tracing.link_to("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
n = 100_000
best = min(timeit.repeat(disabled_step_span, number=n, repeat=5))
tracing.shutdown_tracing()
print(
    json.dumps(
        {
            "configured": configured,
            "enabled": tracing.tracing_enabled(),
            "traceparent": traceparent,
            "helpers_no_op": helpers_no_op,
            "ns_per_call": best / n * 1e9,
        }
    )
)
