"""The files under deploy/: Prometheus alert rules (checked and unit-tested with promtool), the
example Prometheus config, the Grafana dashboard, and that every PromQL expression in them names
only metric families cortex-workers exports (docs/operations.md, Metrics), with their labels."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from support import require_program, wait_until

ROOT = Path(__file__).resolve().parents[2]
PROMETHEUS_DIR = ROOT / "deploy" / "prometheus"
DASHBOARD = ROOT / "deploy" / "grafana" / "cortex-workers.json"
OPERATIONS = ROOT / "docs" / "operations.md"

# family -> (type, labels). Counters are exposed with `_total`, histograms as _bucket/_sum/_count.
FAMILIES: dict[str, tuple[str, frozenset[str]]] = {
    name: (kind, frozenset(labels.split()))
    for name, kind, labels in [
        ("cortex_turns", "counter", "status"),
        ("cortex_turn_duration_seconds", "histogram", "status"),
        ("cortex_steps", "counter", "kind outcome"),
        ("cortex_step_queue_wait_seconds", "histogram", "kind"),
        ("cortex_queue_depth", "gauge", "queue"),
        ("cortex_queue_oldest_age_seconds", "gauge", "queue"),
        ("cortex_steps_in_flight", "gauge", "queue"),
        (
            "gen_ai_client_operation_duration_seconds",
            "histogram",
            "gen_ai_provider_name gen_ai_request_model error_type",
        ),
        (
            "gen_ai_client_token_usage",
            "histogram",
            "gen_ai_provider_name gen_ai_request_model gen_ai_token_type",
        ),
        ("cortex_llm_time_to_first_token_seconds", "histogram", "provider model"),
        ("cortex_llm_cost_usd", "counter", "provider model"),
        ("cortex_llm_retries", "counter", "provider"),
        ("cortex_llm_fallbacks", "counter", "from_provider to_provider"),
        ("cortex_rate_limit_deferrals", "counter", "scope"),
        ("cortex_tool_calls", "counter", "tool severity"),
        ("cortex_tool_duration_seconds", "histogram", "tool"),
        ("cortex_reconciler_actions", "counter", "action"),
        ("cortex_sse_connections", "gauge", "stream"),
        (
            "http_server_request_duration_seconds",
            "histogram",
            "http_route http_request_method http_response_status_code",
        ),
    ]
}
SUFFIXES = {"counter": ("_total",), "gauge": ("",), "histogram": ("_bucket", "_sum", "_count")}
SERIES: dict[str, frozenset[str]] = {
    name + suffix: labels | ({"le"} if suffix == "_bucket" else set())
    for name, (kind, labels) in FAMILIES.items()
    for suffix in SUFFIXES[kind]
}
# Labels of every scraped series: Prometheus' own, and `queues` (deploy/prometheus/prometheus.yml).
TARGET_LABELS = frozenset({"job", "instance", "queues"})
# The alerts may also read whether a target is up.
ALERT_SERIES = {**SERIES, "up": frozenset()}
KEYWORDS = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right"})
KEYWORDS |= {"and", "or", "unless", "bool", "offset", "inf", "nan"}
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$__range": "1h", "$__interval": "1m"}


def series_in(expr: str) -> dict[str, set[str]]:
    """The series names an expression selects, each with the labels it names: in its matchers,
    and (for any of them) in `by`/`without`/`on`/`ignoring` clauses."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    grouping = set()
    for clause in re.findall(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)", expr):
        grouping |= {label.strip() for label in clause.split(",") if label.strip()}
    found: dict[str, set[str]] = {}
    for name, matchers in re.findall(r"([A-Za-z_:][\w:]*)?\s*\{([^}]*)\}", expr):
        if name and name not in KEYWORDS:
            labels = set(re.findall(r"([A-Za-z_]\w*)\s*(?:=~|!~|!=|=)", matchers))
            found.setdefault(name, set()).update(labels)
    bare = re.sub(r"\{[^}]*\}|\[[^\]]*\]", " ", expr)
    bare = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", bare)
    for name in re.findall(r"(?<![\w$.])([A-Za-z_:][\w:]*)\b(?!\s*\()", bare):
        if name not in KEYWORDS:
            found.setdefault(name, set())
    return {name: labels | grouping for name, labels in found.items()}


def check_expr(expr: str, where: str, known: dict[str, frozenset[str]] = SERIES) -> None:
    selected = series_in(expr)
    assert selected, f"{where}: no metric found in {expr!r}"
    for name, labels in selected.items():
        assert name in known, f"{where}: {name!r} is not a cortex-workers metric ({expr!r})"
        allowed = set().union(*(known[n] for n in selected)) | TARGET_LABELS
        unknown = labels - allowed
        assert not unknown, f"{where}: labels {sorted(unknown)} not on {name} ({expr!r})"


def test_the_expression_reader_finds_names_and_labels() -> None:
    expr = (
        "histogram_quantile(0.95, sum by (le, model) (rate(cortex_llm_time_to_first_token_"
        'seconds_bucket{provider="a b{c}"}[$__rate_interval]))) * 2 > bool 1'
    )
    assert series_in(expr) == {
        "cortex_llm_time_to_first_token_seconds_bucket": {"provider", "le", "model"}
    }
    assert set(series_in("cortex_queue_depth + on (queue) cortex_steps_in_flight")) == {
        "cortex_queue_depth",
        "cortex_steps_in_flight",
    }
    with pytest.raises(AssertionError, match="not a cortex-workers metric"):
        check_expr("sum(rate(cortex_turns[5m]))", "example")
    with pytest.raises(AssertionError, match="labels"):
        check_expr('cortex_queue_depth{kind="model"}', "example")


@pytest.fixture(scope="module")
def promtool() -> str:
    return require_program("promtool", "it checks the Prometheus rules and config")


def run_promtool(promtool: str, *args: str) -> str:
    done = subprocess.run(
        [promtool, *args], cwd=PROMETHEUS_DIR, capture_output=True, text=True, timeout=60
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    return output


def test_the_alert_rules_are_valid(promtool: str) -> None:
    assert "SUCCESS" in run_promtool(promtool, "check", "rules", "alerts.yaml")


def test_the_example_config_is_valid_and_loads_the_rules(promtool: str) -> None:
    output = run_promtool(promtool, "check", "config", "prometheus.yml")
    assert "1 rule files found" in output


def test_the_example_config_has_a_maintenance_consumer_for_the_dev_stack_and_in_compose() -> None:
    config = yaml.safe_load((PROMETHEUS_DIR / "prometheus.yml").read_text())
    consumers = {
        job["job_name"]: [
            target
            for static in job["static_configs"]
            if "maintenance" in static.get("labels", {}).get("queues", "").split(",")
            for target in static["targets"]
        ]
        for job in config["scrape_configs"]
    }
    assert consumers["cortex-dev"] == ["127.0.0.1:8000"]
    assert consumers["cortex-worker"] == ["worker-summarize:9100"]


def test_each_alert_fires_on_an_unhealthy_series_and_not_on_a_healthy_one(promtool: str) -> None:
    run_promtool(promtool, "test", "rules", "alerts_test.yaml")
    tests = yaml.safe_load((PROMETHEUS_DIR / "alerts_test.yaml").read_text())["tests"]
    checks = [check for test in tests for check in test["alert_rule_test"]]
    for alert in alerts():
        name = alert["alert"]
        assert any(c["alertname"] == name and c["exp_alerts"] for c in checks), name
        assert any(c["alertname"] == name and not c["exp_alerts"] for c in checks), name


def alerts() -> Iterator[dict[str, Any]]:
    groups = yaml.safe_load((PROMETHEUS_DIR / "alerts.yaml").read_text())["groups"]
    for group in groups:
        yield from group["rules"]


def test_every_alert_has_a_summary_a_description_and_a_runbook_in_the_docs() -> None:
    anchors = set(re.findall(r"\{#([\w-]+)\}", OPERATIONS.read_text()))
    for alert in alerts():
        annotations = alert["annotations"]
        assert annotations["summary"] and annotations["description"], alert["alert"]
        page, _, anchor = annotations["runbook"].partition("#")
        assert page == "docs/operations.md" and anchor in anchors, (alert["alert"], anchor)


def test_the_alert_rules_name_only_cortex_metrics() -> None:
    for alert in alerts():
        check_expr(alert["expr"], alert["alert"], ALERT_SERIES)


def dashboard_exprs() -> list[tuple[str, str]]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [
        (panel["title"], target["expr"])
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
    ]


def test_the_dashboard_is_grafana_json_with_a_prometheus_datasource_variable() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["schemaVersion"] >= 36
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["DS_PROMETHEUS"]["type"] == "datasource"
    assert variables["DS_PROMETHEUS"]["query"] == "prometheus"
    for panel in dashboard["panels"]:
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "${DS_PROMETHEUS}", panel["title"]
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    titles = " | ".join(panel["title"] for panel in dashboard["panels"])
    for wanted in [
        "Turns per second by status",
        "Queue depth",
        "Oldest queued step age",
        "Steps in flight",
        "p95 time to first token by model",
        "p95 model call duration by model",
        "Tokens per second by model",
        "Cost per hour by model",
        "Tool errors by tool",
        "SSE clients by stream",
        "HTTP p95 by route",
    ]:
        assert wanted in titles


def test_the_dashboard_names_only_cortex_metrics() -> None:
    exprs = dashboard_exprs()
    assert len(exprs) >= 11
    for title, expr in exprs:
        check_expr(expr, title)


def test_prometheus_starts_on_a_free_port_and_scrapes_itself(
    start_prometheus: Callable[..., Any],
) -> None:
    prometheus = start_prometheus()
    wait_until(lambda: prometheus.up("prometheus"), timeout=30, what="prometheus scraping itself")
    assert prometheus.alert_names() == {alert["alert"] for alert in alerts()}


def test_prometheus_accepts_every_expression_of_the_dashboard_and_the_alerts(
    start_prometheus: Callable[..., Any],
) -> None:
    prometheus = start_prometheus()
    exprs = [expr for _, expr in dashboard_exprs()] + [alert["expr"] for alert in alerts()]
    for expr in exprs:
        for variable, value in GRAFANA_VARIABLES.items():
            expr = expr.replace(variable, value)
        prometheus.query(expr)  # a parse error is a 400


def test_the_docs_scale_each_queue_on_its_depth_and_steps_in_flight() -> None:
    blocks = re.findall(r"```yaml\n(.*?)```", OPERATIONS.read_text(), flags=re.S)
    scaled = [doc for doc in map(yaml.safe_load, blocks) if doc.get("kind") == "ScaledObject"]
    queues = set()
    for doc in scaled:
        (trigger,) = doc["spec"]["triggers"]
        assert trigger["type"] == "prometheus"
        query = trigger["metadata"]["query"]
        (queue,) = set(re.findall(r'queue="(\w+)"', query))
        assert query == (
            f'max(cortex_queue_depth{{queue="{queue}"}}) + '
            f'max(cortex_steps_in_flight{{queue="{queue}"}})'
        )
        assert int(trigger["metadata"]["threshold"]) > 0
        queues.add(queue)
    assert queues == {"llm", "tools", "summarize"}
