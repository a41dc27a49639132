"""Plays the API and a worker of one turn, each in its own process.

`api`: a request span; prints its traceparent (what the API stores with the turn) as JSON.
`worker TRACEPARENT`: the turn's model step started from that traceparent, with a provider call
and a failing tool run inside, then an SSE request linked to the turn.
"""

from __future__ import annotations

import json
import sys

from opentelemetry.trace import SpanKind

from cortex_workers.observability import tracing


def api() -> None:
    assert tracing.configure_tracing("cortex-api-test")
    with tracing.span("POST /v1/sessions/{session_id}/turns", kind=SpanKind.SERVER):
        traceparent = tracing.current_traceparent()
    tracing.shutdown_tracing()
    print(json.dumps({"traceparent": traceparent}))


def worker(traceparent: str) -> None:
    assert tracing.configure_tracing("cortex-worker-test")
    assert tracing.configure_tracing("cortex-worker-test")  # idempotent
    step = tracing.step_span(
        "model", traceparent=traceparent, turn_id="turn-1", step_no=2, attempt=1, queue="llm"
    )
    with step:
        with tracing.model_call_span("scripted", "m1") as call:
            tracing.record_model_response(
                call,
                response_model="m1-2026",
                input_tokens=12,
                output_tokens=5,
                finish_reasons=["stop"],
            )
            tracing.record_model_content(
                call, input_messages='[{"role": "user"}]', output_messages='[{"role": "x"}]'
            )
        try:
            with tracing.tool_span("echo", "call_1") as run:
                tracing.record_tool_content(run, arguments='{"text": "hi"}', result="hi")
                raise RuntimeError("the tool failed")
        except RuntimeError:
            pass
    with tracing.span("GET /v1/turns/{turn_id}/events", kind=SpanKind.SERVER):
        tracing.link_to(traceparent)
    tracing.shutdown_tracing()
    print(json.dumps({"done": True}))


if __name__ == "__main__":
    if sys.argv[1] == "api":
        api()
    else:
        worker(sys.argv[2])
