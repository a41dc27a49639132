"""What a turn costs on the wire, counted (never timed): Postgres round trips per turn by
process, every BEGIN, COMMIT and pre-ping included, and Redis commands of all processes.

A step is one claim and one commit; a feature that is off costs nothing, and a feature that is
on folds into the commit (docs/architecture.md, "The step"). Each figure is the median over
several turns run one after another, each read between turns from the counting proxies
(`wire_counter`), so a heartbeat or a lease renewal that happens to fall inside one turn's
window does not decide the result, and one more statement per turn does.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hot_path_support import Counted
from support import Api

pytestmark = pytest.mark.servers

TURNS = 9
PLAIN = {"text": "a plain answer of a few words"}
TWO_TOOLS = [
    {
        "text": "Let me check.",
        "tool_calls": [
            {"name": "calculate", "arguments": {"expression": "6 * 7"}},
            {"name": "current_time", "arguments": {}},
        ],
    },
    {"text": "It is 42."},
]
REDIS_PER_PLAIN_TURN = 33
"""Redis commands of one plain turn, all processes: broker, stream, SSE, rate limits (31 in the
median turn on the embedded servers; the measured latency is written once a second per process,
not per step)."""


def _measure_plain(counted: Counted, client: Api, **session: Any) -> dict[str, float]:
    sids = iter([client.scripted_session(PLAIN, **session) for _ in range(TURNS + 1)])

    def run() -> None:
        tid = client.submit(next(sids), "hello")
        events = client.turn_events(tid)
        assert events[-1].event == "done" and events[-1].data["status"] == "done", events

    return counted.measure(run, turns=TURNS)


def _explain(counted: Counted) -> str:
    """Each turn's counts, and the statements of the first turn that cost more than 2."""
    heavy = next(
        (sent for cost, sent in zip(counted.per_turn, counted.sent, strict=True)
         if cost["pg:llm"] > 2 or cost["pg:api"] > 2),
        counted.sent[0] if counted.sent else {},
    )  # fmt: skip
    lines = [json.dumps(cost) for cost in counted.per_turn]
    for process, sent in heavy.items():
        lines += [f"{process}: {sql}" for _app, sql in sent]
    return "\n".join(lines)


def test_a_plain_turn_is_two_round_trips_on_the_api_and_two_on_the_llm_worker(
    counted: Counted, counted_client: Api
) -> None:
    cost = _measure_plain(counted, counted_client)
    assert cost["pg:api"] <= 2, _explain(counted)
    assert cost["pg:llm"] <= 2, _explain(counted)
    assert cost["pg:tools"] == 0, _explain(counted)
    assert cost["redis"] <= REDIS_PER_PLAIN_TURN, _explain(counted)


def test_each_tool_step_is_two_round_trips(counted: Counted, counted_client: Api) -> None:
    sids = iter([counted_client.scripted_session(*TWO_TOOLS) for _ in range(TURNS + 1)])

    def run() -> None:
        tid = counted_client.submit(next(sids), "what is 6 * 7?")
        events = counted_client.turn_events(tid)
        assert events[-1].data["status"] == "done", events
        assert [e.event for e in events].count("tool_result") == 2

    cost = counted.measure(run, turns=TURNS)
    assert cost["pg:tools"] <= 2 * 2, _explain(counted)


def test_a_daily_limit_costs_the_llm_worker_one_round_trip_more(
    counted: Counted, counted_client: Api
) -> None:
    from cortex_workers.runtime import get_runtime
    from cortex_workers.store import tenant_admin
    from cortex_workers.store.db import transaction

    with transaction(get_runtime().db) as db:
        name = counted_client.tenant_name  # type: ignore[attr-defined]
        assert tenant_admin.set_overrides(db, name, {"daily_usd_limit_micros": 50_000_000})
    cost = _measure_plain(counted, counted_client)
    assert cost["pg:llm"] <= 3, _explain(counted)
    assert cost["pg:api"] <= 3, _explain(counted)  # the POST reads the budget it may refuse


def test_a_whiteboard_session_costs_no_more_than_a_plain_one(
    counted: Counted, counted_client: Api
) -> None:
    plain = _measure_plain(counted, counted_client)
    board = _measure_plain(counted, counted_client, whiteboard=True, tools=["calculate"])
    assert board["pg:llm"] <= plain["pg:llm"], _explain(counted)
    assert board["pg:api"] <= plain["pg:api"], _explain(counted)


def test_loop_guards_on_cost_no_more_than_off(counted: Counted, counted_client: Api) -> None:
    def two_tool_cost(**metadata: Any) -> dict[str, float]:
        sids = iter(
            [
                counted_client.scripted_session(*TWO_TOOLS, metadata=metadata)
                for _ in range(TURNS + 1)
            ]
        )

        def run() -> None:
            tid = counted_client.submit(next(sids), "what is 6 * 7?")
            assert counted_client.turn_events(tid)[-1].data["status"] == "done"

        return counted.measure(run, turns=TURNS)

    off = two_tool_cost()
    on = two_tool_cost(tool_call_limits={"calculate": 5, "current_time": 5})
    assert on["pg:llm"] <= off["pg:llm"], _explain(counted)
    assert on["pg:tools"] <= off["pg:tools"], _explain(counted)
