"""The budget's pure values: micro-dollars, the bound of a call's cost, days in a timezone."""

from __future__ import annotations

from datetime import UTC, datetime

from cortex_workers.budget import (
    call_cost_micros,
    day_window,
    estimate_call,
    micros_to_usd,
    usd_to_micros,
)
from cortex_workers.messages import Message, ModelRequest, ToolSpec


def test_amounts_are_integer_micro_dollars_and_costs_round_up() -> None:
    assert usd_to_micros(1.0) == 1_000_000
    assert usd_to_micros(0.1 + 0.2) == 300_000  # no float drift
    assert micros_to_usd(1_234_567) == 1.234567
    # 4096 tokens at $73.2421875/M is exactly $0.30; one token at $0.15/M rounds up to 1 µ$
    assert call_cost_micros(0, 4096, input_per_mtok=0, output_per_mtok=73.2421875) == 300_000
    assert call_cost_micros(1, 0, input_per_mtok=0.15, output_per_mtok=0) == 1


def test_the_maximum_bounds_input_tokens_by_the_request_bytes_and_output_by_max_tokens() -> None:
    text = "héllo wörld " * 50
    request = ModelRequest(
        model="m",
        messages=(Message(role="system", content="be brief"), Message(role="user", content=text)),
        tools=(ToolSpec("t", "a tool", {"type": "object"}),),
    )
    e = estimate_call(request, input_per_mtok=2.5, output_per_mtok=10.0, max_tokens=1000)
    size = len(b"be brief") + len(text.encode()) + len("t") + len("a tool") + 16
    assert e.input_tokens >= size  # a token is at least one byte
    assert e.max_output_tokens == 1000
    assert e.cost_micros_max == call_cost_micros(
        e.input_tokens, 1000, input_per_mtok=2.5, output_per_mtok=10.0
    )
    assert e.cost_micros_expected < e.cost_micros_max
    limited = estimate_call(
        ModelRequest(model="m", messages=request.messages, max_tokens=10),
        input_per_mtok=0,
        output_per_mtok=10.0,
        max_tokens=1000,
    )
    assert limited.max_output_tokens == 10  # the request's own limit wins


def test_a_budget_day_is_the_calendar_day_of_the_budget_timezone() -> None:
    noon = datetime(2026, 3, 29, 12, 0, tzinfo=UTC)  # Europe/Paris moves to summer time
    paris = day_window(noon, "Europe/Paris")
    assert paris.start == datetime(2026, 3, 28, 23, 0, tzinfo=UTC)
    assert paris.resets_at == datetime(2026, 3, 29, 22, 0, tzinfo=UTC)  # a 23-hour day
    late = day_window(datetime(2026, 3, 29, 23, 30, tzinfo=UTC), "Europe/Paris")
    assert late.start == paris.resets_at
    assert day_window(noon, "UTC").start == datetime(2026, 3, 29, tzinfo=UTC)
