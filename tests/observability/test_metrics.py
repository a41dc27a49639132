"""Prometheus metrics: every family of docs/operations.md under its exact name and labels, in
one process and across the processes of a multiprocess stack; a worker serves them on its port."""

from __future__ import annotations

import subprocess
import urllib.request
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample
from support import free_port, wait_until

from cortex_workers.observability import metrics

RunProgram = Callable[..., subprocess.CompletedProcess[str]]
StartProgram = Callable[..., subprocess.Popen[str]]

FAMILIES: dict[str, tuple[str, frozenset[str]]] = {
    "cortex_turns_total": ("counter", frozenset({"status"})),
    "cortex_turn_duration_seconds": ("histogram", frozenset({"status"})),
    "cortex_steps_total": ("counter", frozenset({"kind", "outcome"})),
    "cortex_step_queue_wait_seconds": ("histogram", frozenset({"kind"})),
    "cortex_queue_depth": ("gauge", frozenset({"queue"})),
    "cortex_queue_oldest_age_seconds": ("gauge", frozenset({"queue"})),
    "cortex_steps_in_flight": ("gauge", frozenset({"queue"})),
    "gen_ai_client_operation_duration_seconds": (
        "histogram",
        frozenset({"gen_ai_provider_name", "gen_ai_request_model", "error_type"}),
    ),
    "gen_ai_client_token_usage": (
        "histogram",
        frozenset({"gen_ai_provider_name", "gen_ai_request_model", "gen_ai_token_type"}),
    ),
    "cortex_llm_time_to_first_token_seconds": ("histogram", frozenset({"provider", "model"})),
    "cortex_llm_cost_usd_total": ("counter", frozenset({"provider", "model"})),
    "cortex_llm_retries_total": ("counter", frozenset({"provider"})),
    "cortex_llm_fallbacks_total": ("counter", frozenset({"from_provider", "to_provider"})),
    "cortex_rate_limit_deferrals_total": ("counter", frozenset({"scope"})),
    "cortex_tool_calls_total": ("counter", frozenset({"tool", "severity"})),
    "cortex_tool_duration_seconds": ("histogram", frozenset({"tool"})),
    "cortex_reconciler_actions_total": ("counter", frozenset({"action"})),
    "cortex_budget_alerts_total": ("counter", frozenset({"scope"})),
    "cortex_anomalies_total": ("counter", frozenset({"kind"})),
    "cortex_recoveries_total": ("counter", frozenset({"action"})),
    "cortex_sse_connections": ("gauge", frozenset({"stream"})),
    "http_server_request_duration_seconds": (
        "histogram",
        frozenset({"http_route", "http_request_method", "http_response_status_code"}),
    ),
}
ID_LABELS = {"tenant", "tenant_id", "session", "session_id", "turn", "turn_id", "user", "user_id"}
OURS = ("cortex_", "gen_ai_", "http_server_")


def _declared_types(text: str) -> dict[str, str]:
    """`# TYPE name type` lines of our families: the names exactly as exposed."""
    lines = (line.split() for line in text.splitlines() if line.startswith("# TYPE "))
    return {name: kind for _, _, name, kind in lines if name.startswith(OURS)}


def _samples(text: str) -> list[Sample]:
    return [s for f in text_string_to_metric_families(text) for s in f.samples]


def _value(samples: Iterable[Sample], name: str, **labels: str) -> float | None:
    found = [s.value for s in samples if s.name == name and s.labels == labels]
    return found[0] if found else None


@pytest.mark.parametrize("multiprocess", [False, True], ids=["one-process", "multiprocess"])
def test_every_family_is_exposed_with_exactly_its_name_and_labels(
    run_program: RunProgram, tmp_path: Path, multiprocess: bool
) -> None:
    env = {"PROMETHEUS_MULTIPROC_DIR": str(tmp_path)} if multiprocess else {}
    content_type, text = run_program("emit_all_metrics", env=env).stdout.split("\n", 1)
    assert content_type.startswith("text/plain")
    assert _declared_types(text) == {name: kind for name, (kind, _) in FAMILIES.items()}
    samples = _samples(text)
    for name, (kind, labels) in FAMILIES.items():
        sample_name = f"{name}_count" if kind == "histogram" else name
        ours = [s for s in samples if s.name == sample_name]
        assert ours, f"{sample_name} has no sample"
        assert {frozenset(s.labels) for s in ours} == {labels}, name
    assert not {label for s in samples for label in s.labels} & ID_LABELS
    assert _value(samples, "cortex_queue_depth", queue="llm") == 3
    assert _value(samples, "cortex_steps_in_flight", queue="llm") == 2
    assert _value(samples, "cortex_reconciler_actions_total", action="republished") == 2
    assert _value(samples, "cortex_sse_connections", stream="turn") == 1


def test_processes_sharing_a_multiprocess_dir_add_up_and_dead_ones_leave_the_live_gauges(
    start_program: StartProgram, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {"PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    children = [start_program("count_metrics", n, env=env) for n in ("3", "4")]
    pids = [int(child.communicate(timeout=60)[0]) for child in children]
    assert [child.returncode for child in children] == [0, 0]
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))

    samples = _samples(metrics.render_latest()[0].decode())
    assert _value(samples, "cortex_turns_total", status="done") == 7
    assert _value(samples, "cortex_turn_duration_seconds_count", status="done") == 7
    assert _value(samples, "cortex_turn_duration_seconds_sum", status="done") == 7 * 1.5
    assert _value(samples, "cortex_steps_total", kind="model", outcome="done") == 7
    assert _value(samples, "cortex_sse_connections", stream="turn") == 2

    metrics.mark_process_dead(pids[0])
    samples = _samples(metrics.render_latest()[0].decode())
    assert _value(samples, "cortex_sse_connections", stream="turn") == 1
    assert _value(samples, "cortex_turns_total", status="done") == 7  # counters outlive the pid


def test_the_queue_statistics_are_read_at_each_scrape_and_not_when_registered() -> None:
    reads: list[int] = []

    def fetch() -> list[metrics.QueueStats]:
        reads.append(1)
        return [metrics.QueueStats(queue="tools", depth=len(reads), oldest_age_s=0.0, in_flight=0)]

    collector = metrics.QueueStatsCollector(fetch)
    registry = metrics.registry_for_scrape([collector])
    assert reads == []
    first = _samples(generate_latest(registry).decode())
    second = _samples(metrics.render_latest([collector])[0].decode())
    assert _value(first, "cortex_queue_depth", queue="tools") == 1
    assert _value(second, "cortex_queue_depth", queue="tools") == 2


def test_a_failing_queue_statistics_query_leaves_the_families_empty_and_the_scrape_whole() -> None:
    def unavailable() -> list[metrics.QueueStats]:
        raise ConnectionError("database unreachable")

    text = metrics.render_latest([metrics.QueueStatsCollector(unavailable)])[0].decode()
    types = _declared_types(text)
    assert types["cortex_queue_depth"] == "gauge" and "cortex_turns_total" in types
    assert not [s for s in _samples(text) if s.name.startswith("cortex_queue_")]


def test_a_worker_serves_its_metrics_on_its_port_and_none_on_port_zero(
    run_program: RunProgram, start_program: StartProgram
) -> None:
    assert run_program("serve_metrics", "0").stdout.strip() == "off"
    port = free_port()
    server = start_program("serve_metrics", str(port))
    assert server.stdout is not None and server.stdout.readline().strip() == "started"
    url = f"http://127.0.0.1:{port}/metrics"
    text = wait_until(lambda: urllib.request.urlopen(url, timeout=5).read().decode())
    samples = _samples(text)
    assert _value(samples, "cortex_steps_total", kind="tool", outcome="retried") == 1


def test_the_metrics_token_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CORTEX_METRICS_TOKEN", " s3cret ")
    assert metrics.metrics_token() == "s3cret"
    monkeypatch.setenv("CORTEX_METRICS_TOKEN", "")
    assert metrics.metrics_token() is None
