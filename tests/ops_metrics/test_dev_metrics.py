"""The API's `/metrics` under `cortex-workers dev` shows the whole stack: after a turn that calls
two tools and one whose model call fails once and whose tool calls fail, the workers' counters
(turn ends, step outcomes, tool calls by severity, tokens, retries) and the API's own (requests by
route, open streams) and the queue gauges are there with the expected counts; a real Prometheus
scrapes it and answers PromQL over it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import httpx
import pytest
from deploy.conftest import Prometheus
from ops_metrics.dev_metrics import DevMetricsStack
from prometheus_client.parser import text_string_to_metric_families
from support import stream_until_done, wait_until

TWO_TOOLS = [
    {
        "text": "Working.",
        "tool_calls": [
            {"name": "calculate", "arguments": {"expression": "2**10"}},
            {"name": "current_time", "arguments": {}},
        ],
    },
    {"text": "2**10 is 1024."},
]
FAILURES = [
    {
        "error": {"status": 503, "message": "the provider is overloaded", "times": 1},
        "tool_calls": [
            {"name": "no_such_tool", "arguments": {}},
            {"name": "calculate", "arguments": {"expr": "1+1"}},  # not its argument
        ],
    },
    {"text": "Neither tool worked."},
]
SUBMIT = "/v1/sessions/{session_id}/turns"

Sample = tuple[str, frozenset[tuple[str, str]]]


def scrape(base: str) -> Counter[Sample]:
    response = httpx.get(f"{base}/metrics", timeout=30)
    assert response.status_code == 200, response.text
    out: Counter[Sample] = Counter()
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            out[(sample.name, frozenset(sample.labels.items()))] += sample.value
    return out


def total(samples: Counter[Sample], name: str, **labels: str) -> float:
    """The sum of `name`'s samples whose labels include `labels`."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= ls)


def run_turn(stack: DevMetricsStack, script: list[dict[str, object]]) -> str:
    sid = stack.api.post("/v1/sessions", json={"metadata": {"script": script}}).json()["id"]
    response = stack.api.post(f"/v1/sessions/{sid}/turns", json={"content": "go"})
    assert response.status_code == 202, response.text
    tid = str(response.json()["id"])
    events = stream_until_done(stack.api, f"/v1/turns/{tid}/events")
    assert events[-1].data["status"] == "done", stack.log.read_text()[-4000:]
    return tid


@pytest.fixture(scope="module")
def after_two_turns(dev_metrics_stack: DevMetricsStack) -> Callable[[], Counter[Sample]]:
    """Runs the two turns once; returns a scrape of the stack's `/metrics`."""
    run_turn(dev_metrics_stack, TWO_TOOLS)
    run_turn(dev_metrics_stack, FAILURES)
    return lambda: scrape(dev_metrics_stack.base)


def test_the_apis_metrics_count_what_every_process_of_the_stack_did(
    after_two_turns: Callable[[], Counter[Sample]],
) -> None:
    # a turn's end is counted right after its commit, which the stream may report first
    wait_until(
        lambda: total(after_two_turns(), "cortex_turns_total", status="done") == 2,
        timeout=15,
        what="both turns counted",
    )
    found = after_two_turns()
    assert total(found, "cortex_turns_total", status="failed") == 0
    assert total(found, "cortex_turn_duration_seconds_count", status="done") == 2
    steps = "cortex_steps_total"
    assert total(found, steps, kind="model", outcome="retried") >= 1
    assert total(found, steps, kind="model", outcome="done") == 4
    assert total(found, steps, kind="tool", outcome="done") == 4
    assert total(found, "cortex_step_queue_wait_seconds_count", kind="tool") == 4
    assert total(found, "cortex_llm_retries_total", provider="scripted") == 1

    tools = "cortex_tool_calls_total"
    assert total(found, tools, tool="calculate", severity="ok") == 1
    assert total(found, tools, tool="current_time", severity="ok") == 1
    assert total(found, tools, tool="calculate", severity="warning") == 1  # bad arguments
    assert total(found, tools, tool="unknown", severity="warning") == 1  # a made-up name
    assert total(found, tools) == 4
    assert total(found, "cortex_tool_duration_seconds_count") == 4

    tokens = "gen_ai_client_token_usage_count"
    assert total(found, tokens, gen_ai_provider_name="scripted", gen_ai_token_type="input") == 4
    assert total(found, tokens, gen_ai_provider_name="scripted", gen_ai_token_type="output") == 4
    calls = "gen_ai_client_operation_duration_seconds_count"
    assert total(found, calls, gen_ai_provider_name="scripted", error_type="") == 4
    assert total(found, calls, gen_ai_provider_name="scripted", error_type="provider_503") == 1


def test_the_apis_own_metrics_and_the_queue_gauges_are_there_too(
    after_two_turns: Callable[[], Counter[Sample]],
) -> None:
    found = after_two_turns()
    http = "http_server_request_duration_seconds_count"
    submitted = {"http_route": SUBMIT, "http_request_method": "POST"}
    assert total(found, http, **submitted, http_response_status_code="202") == 2
    assert total(found, http, http_route="/v1/turns/{turn_id}/events") == 2
    assert total(found, "cortex_sse_connections", stream="turn") == 0  # both streams ended
    assert ("cortex_sse_connections", frozenset({("stream", "turn")})) in found
    for gauge in (
        "cortex_queue_depth",
        "cortex_queue_oldest_age_seconds",
        "cortex_steps_in_flight",
    ):
        queues = {dict(labels)["queue"] for name, labels in found if name == gauge}
        assert {"llm", "tools", "summarize"} <= queues, (gauge, queues)


def test_prometheus_scrapes_the_stack_and_answers_promql(
    dev_metrics_stack: DevMetricsStack,
    after_two_turns: Callable[[], Counter[Sample]],
    start_prometheus: Callable[..., Prometheus],
) -> None:
    wait_until(
        lambda: total(after_two_turns(), "cortex_turns_total", status="done") == 2,
        timeout=15,
        what="both turns counted",
    )
    prometheus = start_prometheus([dev_metrics_stack.base.removeprefix("http://")])

    def done_turns() -> list[str]:
        result = prometheus.query('sum(cortex_turns_total{status="done"})')["data"]["result"]
        return [value for _, value in (r["value"] for r in result)]

    wait_until(lambda: done_turns() == ["2"], timeout=60, what="prometheus to scrape the stack")
    assert prometheus.up("cortex")
    rate = prometheus.query("sum by (http_route) (http_server_request_duration_seconds_count)")
    routes = {r["metric"].get("http_route") for r in rate["data"]["result"]}
    assert SUBMIT in routes
