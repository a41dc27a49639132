"""Calls every metrics helper once and prints the scrape (with the queue collector) on stdout."""

from __future__ import annotations

import sys

from cortex_workers.observability import metrics


def fetch() -> list[metrics.QueueStats]:
    return [metrics.QueueStats(queue="llm", depth=3, oldest_age_s=1.5, in_flight=2)]


metrics.observe_turn_finished("done", 2.0)
metrics.count_step("model", "done")
metrics.observe_step_queue_wait("model", 0.02)
metrics.observe_model_call(
    "scripted", "m1", seconds=0.3, input_tokens=10, output_tokens=4, cost_usd=0.001, ttft_s=0.1
)
metrics.count_llm_retry("scripted")
metrics.count_llm_fallback("openai", "anthropic")
metrics.count_rate_limit_deferral("tenant")
metrics.count_tool_call("echo", "ok", 0.01)
metrics.count_reconciler_action("republished", 2)
metrics.count_budget_alert("tenant")
metrics.count_anomaly("short_output")
metrics.count_recovery("retry")
with metrics.sse_connection("turn"):
    metrics.observe_http("/v1/turns/{turn_id}", "GET", 200, 0.004)
    body, content_type = metrics.render_latest([metrics.QueueStatsCollector(fetch)])
sys.stdout.write(content_type + "\n")
sys.stdout.write(body.decode())
