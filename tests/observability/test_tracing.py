"""Traces: a turn's steps are spans in the trace of the request that created the turn, whichever
process runs them; provider calls and tool runs carry the GenAI attributes; tracing is off and
costs next to nothing unless the standard OTEL_* variables ask for it."""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections.abc import Callable

import pytest
from fakes.otlp_receiver import OtlpReceiver, ReceivedSpan

RunProgram = Callable[..., subprocess.CompletedProcess[str]]
REQUEST = "POST /v1/sessions/{session_id}/turns"
SSE = "GET /v1/turns/{turn_id}/events"
WORKER_SPANS = {"cortex.step model", "chat m1", "execute_tool echo", SSE}


def _by_name(spans: list[ReceivedSpan]) -> dict[str, ReceivedSpan]:
    return {span.name: span for span in spans}


def _has(names: set[str]) -> object:
    return lambda spans: names <= {span.name for span in spans}


def _run_turn(
    run_program: RunProgram, receiver: OtlpReceiver, env: dict[str, str]
) -> tuple[str, dict[str, ReceivedSpan]]:
    api = run_program("trace_turn", "api", env={**receiver.env(), **env})
    traceparent = json.loads(api.stdout)["traceparent"]
    run_program("trace_turn", "worker", traceparent, env={**receiver.env(), **env})
    spans = receiver.wait_for(_has({REQUEST} | WORKER_SPANS))
    return traceparent, _by_name(spans)


def test_a_step_started_from_the_stored_traceparent_is_a_child_of_the_request_in_another_process(
    run_program: RunProgram, otlp_receiver: OtlpReceiver
) -> None:
    traceparent, spans = _run_turn(run_program, otlp_receiver, {})
    request, step = spans[REQUEST], spans["cortex.step model"]
    version, trace_id, span_id, flags = traceparent.split("-")
    assert (version, trace_id, span_id) == ("00", request.trace_id, request.span_id)
    assert int(flags, 16) & 1  # sampled
    assert request.kind == "server" and request.parent_span_id is None
    assert request.resource["service.name"] == "cortex-api-test"
    assert step.resource["service.name"] == "cortex-worker-test"
    assert (step.trace_id, step.parent_span_id) == (request.trace_id, request.span_id)
    assert step.kind == "consumer"
    assert step.attributes == {
        "cortex.turn_id": "turn-1",
        "cortex.step_no": 2,
        "cortex.attempt": 1,
        "messaging.destination.name": "llm",
    }


def test_provider_call_and_tool_spans_carry_the_genai_attributes_and_errors(
    run_program: RunProgram, otlp_receiver: OtlpReceiver
) -> None:
    _, spans = _run_turn(run_program, otlp_receiver, {})
    step, call, tool = spans["cortex.step model"], spans["chat m1"], spans["execute_tool echo"]
    assert (call.parent_span_id, tool.parent_span_id) == (step.span_id, step.span_id)
    assert call.kind == "client" and call.status == "unset"
    assert call.attributes == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "scripted",
        "gen_ai.request.model": "m1",
        "gen_ai.response.model": "m1-2026",
        "gen_ai.usage.input_tokens": 12,
        "gen_ai.usage.output_tokens": 5,
        "gen_ai.response.finish_reasons": ["stop"],
    }
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool.attributes["gen_ai.tool.name"] == "echo"
    assert tool.attributes["gen_ai.tool.call.id"] == "call_1"
    assert tool.attributes["error.type"] == "RuntimeError"
    assert (tool.status, tool.status_message) == ("error", "RuntimeError")
    assert [event.name for event in tool.events] == ["exception"]
    assert step.status == "unset"  # the tool's error was handled inside the step


def test_an_sse_request_links_to_the_turn_instead_of_joining_its_trace(
    run_program: RunProgram, otlp_receiver: OtlpReceiver
) -> None:
    _, spans = _run_turn(run_program, otlp_receiver, {})
    request, sse = spans[REQUEST], spans[SSE]
    assert sse.trace_id != request.trace_id
    assert [(link.trace_id, link.span_id) for link in sse.links] == [
        (request.trace_id, request.span_id)
    ]


@pytest.mark.parametrize("flag", ["", "true"], ids=["default", "CORTEX_TRACE_CONTENT=true"])
def test_prompts_completions_and_tool_arguments_go_on_spans_only_when_asked(
    run_program: RunProgram, otlp_receiver: OtlpReceiver, flag: str
) -> None:
    _, spans = _run_turn(run_program, otlp_receiver, {"CORTEX_TRACE_CONTENT": flag})
    content = {
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
    }
    recorded = {key for span in spans.values() for key in span.attributes} & content
    assert recorded == (content if flag else set())


@pytest.mark.parametrize(
    "variables",
    [{}, {"OTEL_TRACES_EXPORTER": "none"}, {"OTEL_SDK_DISABLED": "true"}],
    ids=["no-otel-variables", "exporter-none", "sdk-disabled"],
)
def test_tracing_is_off_unless_asked_and_its_helpers_do_nothing(
    run_program: RunProgram, otlp_receiver: OtlpReceiver, variables: dict[str, str]
) -> None:
    env = {**otlp_receiver.env(), **variables} if variables else {}
    result = json.loads(run_program("tracing_off", env=env).stdout)
    assert result["configured"] is False and result["enabled"] is False
    assert result["traceparent"] is None
    assert result["helpers_no_op"] is True
    # what a disabled helper costs is a benchmark's figure (scripts/bench, observability), not
    # a test's: `ns_per_call` is only reported
    time.sleep(0.3)
    assert otlp_receiver.spans == [] and otlp_receiver.requests == 0


def test_tracing_set_up_before_a_fork_keeps_exporting_from_parent_and_child(
    run_program: RunProgram, otlp_receiver: OtlpReceiver
) -> None:
    run_program("fork_trace", env=otlp_receiver.env())
    names = {"before fork", "in child", "in parent after fork"}
    spans = _by_name(otlp_receiver.wait_for(_has(names)))
    assert spans["in child"].trace_id != spans["in parent after fork"].trace_id


def test_a_collector_that_never_answers_does_not_hold_up_a_stop(run_program: RunProgram) -> None:
    # a listening socket nobody accepts from: the exporter's request waits for its own timeout
    # (600 s here, retried until then); the process still stops within the bound it was given
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        endpoint = f"http://127.0.0.1:{silent.getsockname()[1]}"
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_TIMEOUT": "600"}
        result = run_program("dead_collector", "1", env=env, timeout=120)
    assert json.loads(result.stdout) == {"configured": True, "enabled": False}
    assert "were not exported within 1 s of shutdown" in result.stderr
