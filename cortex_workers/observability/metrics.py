"""Prometheus metrics: every family defined once, the scrape registry, and helpers for call sites.

Each family is a module-level object (cheap, no I/O). prometheus_client picks its storage when
it is imported: with `PROMETHEUS_MULTIPROC_DIR` set (the worker's prefork pool, and every
process of `cortex-workers dev`) values go to files in that directory and a scrape adds them up
with `MultiProcessCollector`; without it they live in this process. The queue gauges are read
from Postgres at scrape time by a `QueueStatsCollector` the API registers on the scrape
registry. Labels never carry tenant, session, turn or user ids: they would make a series per
conversation. The families and their labels are listed in docs/operations.md.

Counters are declared without `_total`; prometheus_client appends it, so `Counter("cortex_turns")`
is exposed as `cortex_turns_total`.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
    start_http_server,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from cortex_workers.settings import get_settings

log = logging.getLogger(__name__)

MULTIPROC_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"
METRICS_TOKEN_ENV = "CORTEX_METRICS_TOKEN"

# Buckets: the OpenTelemetry GenAI and HTTP semantic conventions' advice where there is one.
_GEN_AI_SECONDS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96)
_GEN_AI_TOKENS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304)
_HTTP_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10)
_TURN_SECONDS = (0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600, 1800)
_WAIT_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
_TTFT_SECONDS = (0.05, 0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10, 20, 60)
_TOOL_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)

TURNS = Counter("cortex_turns", "Turns finished, by final status.", ["status"])
TURN_DURATION = Histogram(
    "cortex_turn_duration_seconds",
    "Time from a turn's creation to its final status.",
    ["status"],
    buckets=_TURN_SECONDS,
)
STEPS = Counter("cortex_steps", "Steps run, by kind and outcome.", ["kind", "outcome"])
STEP_QUEUE_WAIT = Histogram(
    "cortex_step_queue_wait_seconds",
    "Time from a step's commit to its claim by a worker.",
    ["kind"],
    buckets=_WAIT_SECONDS,
)
GEN_AI_DURATION = Histogram(
    "gen_ai_client_operation_duration_seconds",
    "Duration of a model provider call (OpenTelemetry GenAI semantic conventions).",
    ["gen_ai_provider_name", "gen_ai_request_model", "error_type"],
    buckets=_GEN_AI_SECONDS,
)
GEN_AI_TOKENS = Histogram(
    "gen_ai_client_token_usage",
    "Tokens used by a model provider call (OpenTelemetry GenAI semantic conventions).",
    ["gen_ai_provider_name", "gen_ai_request_model", "gen_ai_token_type"],
    buckets=_GEN_AI_TOKENS,
)
TIME_TO_FIRST_TOKEN = Histogram(
    "cortex_llm_time_to_first_token_seconds",
    "Time from sending a model request to its first streamed token.",
    ["provider", "model"],
    buckets=_TTFT_SECONDS,
)
LLM_COST = Counter(
    "cortex_llm_cost_usd", "Estimated model cost in US dollars.", ["provider", "model"]
)
LLM_RETRIES = Counter(
    "cortex_llm_retries", "Model calls retried on the same provider.", ["provider"]
)
LLM_FALLBACKS = Counter(
    "cortex_llm_fallbacks",
    "Model calls moved to the next provider of the fallback chain.",
    ["from_provider", "to_provider"],
)
RATE_LIMIT_DEFERRALS = Counter(
    "cortex_rate_limit_deferrals", "Steps deferred by a rate limit, by its scope.", ["scope"]
)
TOOL_CALLS = Counter(
    "cortex_tool_calls", "Tool calls run, by tool and severity.", ["tool", "severity"]
)
TOOL_DURATION = Histogram(
    "cortex_tool_duration_seconds", "Duration of a tool run.", ["tool"], buckets=_TOOL_SECONDS
)
RECONCILER_ACTIONS = Counter(
    "cortex_reconciler_actions", "Repairs made by the reconciler, by action.", ["action"]
)

BUDGET_ALERTS = Counter(
    "cortex_budget_alerts",
    "Budget alerts fired (once per scope and window), by scope: global or tenant.",
    ["scope"],
)
ANOMALIES = Counter(
    "cortex_anomalies",
    "Anomalies detected in turns, by kind (docs/checkpoints.md).",
    ["kind"],
)
RECOVERIES = Counter(
    "cortex_recoveries", "Recovery actions taken after an anomaly, by action.", ["action"]
)
SSE_CONNECTIONS = Gauge(
    "cortex_sse_connections",
    "Open server-sent-event connections, by stream.",
    ["stream"],
    multiprocess_mode="livesum",
)
HTTP_DURATION = Histogram(
    "http_server_request_duration_seconds",
    "Duration of API requests (OpenTelemetry HTTP semantic conventions).",
    ["http_route", "http_request_method", "http_response_status_code"],
    buckets=_HTTP_SECONDS,
)


def observe_turn_finished(status: str, seconds: float) -> None:
    """A turn reached its final `status` (done, failed, cancelled) `seconds` after creation."""
    TURNS.labels(str(status)).inc()
    TURN_DURATION.labels(str(status)).observe(seconds)


def count_step(kind: str, outcome: str) -> None:
    """A step of `kind` ended with `outcome`: done, retried, failed, deferred or duplicate."""
    STEPS.labels(str(kind), str(outcome)).inc()


def observe_step_queue_wait(kind: str, seconds: float) -> None:
    """A step of `kind` was claimed `seconds` after it was committed."""
    STEP_QUEUE_WAIT.labels(str(kind)).observe(max(seconds, 0.0))


def observe_model_call(
    provider: str,
    model: str,
    *,
    seconds: float,
    error_type: str | None = None,
    input_tokens: int | None = None,
    output_tokens: int | None = None,
    cost_usd: float | None = None,
    ttft_s: float | None = None,
) -> None:
    """One provider call: its duration, and what is known of its tokens, cost and first token.

    `error_type` is the error's class name (or a provider error code) when the call failed,
    None when it succeeded (exposed as an empty label, as the conventions leave it unset).
    """
    provider, model = str(provider), str(model)
    GEN_AI_DURATION.labels(provider, model, str(error_type or "")).observe(seconds)
    if input_tokens is not None:
        GEN_AI_TOKENS.labels(provider, model, "input").observe(input_tokens)
    if output_tokens is not None:
        GEN_AI_TOKENS.labels(provider, model, "output").observe(output_tokens)
    if cost_usd:
        LLM_COST.labels(provider, model).inc(cost_usd)
    if ttft_s is not None:
        TIME_TO_FIRST_TOKEN.labels(provider, model).observe(ttft_s)


def count_llm_retry(provider: str) -> None:
    """A model call is retried on `provider`."""
    LLM_RETRIES.labels(str(provider)).inc()


def count_llm_fallback(from_provider: str, to_provider: str) -> None:
    """A model call moves from `from_provider` to `to_provider`."""
    LLM_FALLBACKS.labels(str(from_provider), str(to_provider)).inc()


def count_rate_limit_deferral(scope: str) -> None:
    """A step was deferred by the rate limit of `scope` (a rate-limit kind)."""
    RATE_LIMIT_DEFERRALS.labels(str(scope)).inc()


def count_tool_call(tool: str, severity: str, seconds: float) -> None:
    """A run of `tool` ended with `severity` after `seconds`."""
    TOOL_CALLS.labels(str(tool), str(severity)).inc()
    TOOL_DURATION.labels(str(tool)).observe(seconds)


def count_budget_alert(scope: str) -> None:
    """A budget scope's spend crossed `alert_at_pct` of its limit (once per window)."""
    BUDGET_ALERTS.labels(scope).inc()


def count_anomaly(kind: str) -> None:
    """A detector saw an anomaly of `kind`."""
    ANOMALIES.labels(str(kind)).inc()


def count_recovery(action: str) -> None:
    """A recovery `action` followed an anomaly."""
    RECOVERIES.labels(str(action)).inc()


def count_reconciler_action(action: str, n: int = 1) -> None:
    """The reconciler did `action` (republished, lease_expired, ...) to `n` rows."""
    if n:
        RECONCILER_ACTIONS.labels(str(action)).inc(n)


@contextmanager
def sse_connection(stream: str) -> Iterator[None]:
    """Counts an open server-sent-event connection of `stream` (turn, session) while inside."""
    gauge = SSE_CONNECTIONS.labels(str(stream))
    gauge.inc()
    try:
        yield
    finally:
        gauge.dec()


def observe_http(route: str, method: str, status: int | str, seconds: float) -> None:
    """An API request to `route` (the template, e.g. `/v1/turns/{turn_id}`, never the path)."""
    HTTP_DURATION.labels(str(route), str(method), str(status)).observe(seconds)


@dataclass(frozen=True, slots=True)
class QueueStats:
    """The state of one queue's steps, read from Postgres."""

    queue: str
    depth: int
    """Steps committed and not yet claimed."""
    oldest_age_s: float
    """Age of the oldest of those, 0 when there is none."""
    in_flight: int
    """Steps leased by a worker."""


class QueueStatsCollector(Collector):
    """Yields `cortex_queue_depth`, `cortex_queue_oldest_age_seconds` and `cortex_steps_in_flight`
    from `fetch()` at each scrape. Register it on the scrape registry (`registry_for_scrape`), not
    the default one: it works the same with and without multiprocess mode. When `fetch` fails the
    families are exposed without samples and the error is logged, so the rest of the scrape
    still arrives."""

    def __init__(self, fetch: Callable[[], Sequence[QueueStats]]) -> None:
        self._fetch = fetch

    def describe(self) -> Iterable[Metric]:
        """The families without samples, so registering does not query the database."""
        return _queue_families(())

    def collect(self) -> Iterable[Metric]:
        try:
            stats = self._fetch()
        except Exception:
            log.exception("queue statistics unavailable for this scrape")
            stats = ()
        return _queue_families(stats)


def _queue_families(stats: Sequence[QueueStats]) -> list[Metric]:
    depth = GaugeMetricFamily(
        "cortex_queue_depth", "Steps committed and not yet claimed.", labels=["queue"]
    )
    oldest = GaugeMetricFamily(
        "cortex_queue_oldest_age_seconds",
        "Age of the oldest step committed and not yet claimed.",
        labels=["queue"],
    )
    in_flight = GaugeMetricFamily(
        "cortex_steps_in_flight", "Steps leased by a worker.", labels=["queue"]
    )
    for row in stats:
        depth.add_metric([str(row.queue)], row.depth)
        oldest.add_metric([str(row.queue)], row.oldest_age_s)
        in_flight.add_metric([str(row.queue)], row.in_flight)
    return [depth, oldest, in_flight]


_WITH_CREATED = frozenset({"counter", "histogram", "summary"})


class _ThisProcess(Collector):
    """The default registry's families, for a scrape registry of a single process.

    Without the `_created` series, which multiprocess mode does not have either: both modes
    expose the same names."""

    def collect(self) -> Iterator[Metric]:
        for family in REGISTRY.collect():
            if family.type in _WITH_CREATED:
                family.samples = [s for s in family.samples if not s.name.endswith("_created")]
            yield family


class _MultiProcessFactory(Protocol):
    """`multiprocess.MultiProcessCollector`'s signature: prometheus_client leaves it unannotated."""

    def __call__(self, registry: CollectorRegistry | None, path: str | None = None) -> object: ...


def multiprocess_dir() -> str | None:
    """`PROMETHEUS_MULTIPROC_DIR` when multiprocess mode is on, else None."""
    return os.environ.get(MULTIPROC_DIR_ENV) or None


def expose_reconciler_actions(actions: Iterable[str]) -> None:
    """Each action's series of `cortex_reconciler_actions_total`, at 0 before the first repair."""
    for action in actions:
        RECONCILER_ACTIONS.labels(str(action))


def registry_for_scrape(extra: Sequence[Collector] = ()) -> CollectorRegistry:
    """A registry for one scrape: every process's families in multiprocess mode (the files in
    `PROMETHEUS_MULTIPROC_DIR`), else this process's, plus the `extra` collectors.

    Build one per scrape: it is cheap, and `extra` collectors are registered on it only.
    """
    registry = CollectorRegistry()
    path = multiprocess_dir()
    if path is not None:
        collector: _MultiProcessFactory = multiprocess.MultiProcessCollector
        collector(registry, path)
    else:
        registry.register(_ThisProcess())
    for item in extra:
        registry.register(item)
    return registry


def render_latest(extra: Sequence[Collector] = ()) -> tuple[bytes, str]:
    """The Prometheus text exposition of `registry_for_scrape(extra)` and its content type."""
    return generate_latest(registry_for_scrape(extra)), CONTENT_TYPE_LATEST


def start_worker_metrics_server(port: int, *, addr: str = "0.0.0.0") -> bool:
    """Serves `/metrics` on `port` from a daemon thread; does nothing when `port` is 0.

    In a prefork worker call it once, in the parent: in multiprocess mode it serves every
    child's values. Returns whether a server was started.
    """
    if port == 0:
        return False
    start_http_server(port, addr=addr, registry=registry_for_scrape())
    log.info("metrics on http://%s:%d/metrics", addr, port)
    return True


def mark_process_dead(pid: int) -> None:
    """Drops the live gauges of exited process `pid` (multiprocess mode; else nothing to do).

    Call it from the parent when a pool child exits, so a dead child's open SSE connections or
    in-flight steps no longer count."""
    path = multiprocess_dir()
    if path is not None:
        dead: Callable[[int, str], None] = multiprocess.mark_process_dead  # unannotated upstream
        dead(pid, path)


def reset_multiprocess_dir(path: Path) -> None:
    """Creates `path` empty, for a multiprocess stack about to start (`cortex-workers dev`).

    Values left from an earlier run would otherwise be added to this one's."""
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)


def metrics_token() -> str | None:
    """The bearer token a scrape of the API's `/metrics` must send, or None when it is open.

    `CORTEX_METRICS_TOKEN` in the environment, else a `metrics_token` setting when the settings
    define one."""
    token = os.environ.get(METRICS_TOKEN_ENV, "").strip()
    if token:
        return token
    configured: object = getattr(get_settings(), "metrics_token", None)
    secret = getattr(configured, "get_secret_value", None)
    if callable(secret):
        configured = secret()
    if not isinstance(configured, str):
        return None
    return configured.strip() or None
