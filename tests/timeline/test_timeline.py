"""The execution timeline of a turn: recorded in Postgres, in order, by the places that know
the facts, and read with `GET /v1/turns/{tid}/timeline`."""

from __future__ import annotations

import uuid

from support import Api
from timeline_support import kinds, timeline

TOOL_THEN_ANSWER = [
    {
        "text": "Let me compute.",
        "tool_calls": [{"name": "calculate", "arguments": {"expression": "6*7"}}],
    },
    {"text": "It is 42."},
]


def test_a_turn_with_a_tool_records_route_budget_tool_and_completion_in_order(
    client: Api,
) -> None:
    sid = client.scripted_session(*TOOL_THEN_ANSWER)
    tid = client.submit(sid, "what is 6*7?")
    assert client.wait_turn(tid)["status"] == "done"
    events = timeline(client, tid)
    assert kinds(events) == [
        "route", "budget", "budget", "tool", "route", "budget", "budget", "completion",
    ]  # fmt: skip
    assert [e["step"] for e in events] == [1, 1, 1, 2, 3, 3, 3, 3]
    route = events[0]["data"]
    assert route["provider"] == "scripted" and route["attempt"] == 1 and route["reason"]
    assert [e["data"]["action"] for e in events if e["kind"] == "budget"] == [
        "reserved", "settled", "reserved", "settled",
    ]  # fmt: skip
    tool = events[3]["data"]
    assert tool["name"] == "calculate" and tool["arguments"] == {"expression": "6*7"}
    assert tool["is_error"] is False and tool["severity"] is not None
    done = events[-1]["data"]
    assert done["chars"] == len("It is 42.") and done["output_tokens"] > 0
    ats = [e["at"] for e in events]
    assert ats == sorted(ats)


def test_a_retried_call_is_in_the_timeline(client: Api) -> None:
    sid = client.scripted_session(
        {"text": "made it", "error": {"status": 503, "message": "overloaded", "times": 1}}
    )
    tid = client.submit(sid, "hi")
    assert client.wait_turn(tid)["status"] == "done"
    events = timeline(client, tid)
    assert "retry" in kinds(events)
    retry = next(e for e in events if e["kind"] == "retry")
    assert retry["step"] == 1 and retry["data"]["attempt"] == 1
    assert "overloaded" in retry["data"]["message"] and retry["data"]["delay_s"] >= 0
    routes = [e["data"]["attempt"] for e in events if e["kind"] == "route"]
    assert routes == [1, 2]
    assert kinds(events)[-1] == "completion"


def test_a_failed_turn_ends_its_timeline_with_the_failure(client: Api) -> None:
    sid = client.scripted_session(
        {"text": "never", "error": {"status": 400, "message": "bad request: no such model"}}
    )
    tid = client.submit(sid, "hi")
    turn = client.wait_turn(tid)
    assert turn["status"] == "failed"
    events = timeline(client, tid)
    assert kinds(events)[-1] == "failure"
    assert events[-1]["data"] == turn["error"]
    assert "completion" not in kinds(events)


def test_the_depth_cap_is_a_failure_in_the_timeline(client: Api) -> None:
    sid = client.scripted_session(
        *[
            {
                "text": "again",
                "tool_calls": [{"name": "calculate", "arguments": {"expression": f"{i}+1"}}],
            }
            for i in range(10)
        ]
    )
    tid = client.submit(sid, "loop")
    turn = client.wait_turn(tid)
    assert turn["error"]["code"] == "depth_exceeded"
    events = timeline(client, tid)
    assert events[-1]["kind"] == "failure"
    # the detector saw it too; its action here is the default, `continue` (record only)
    (anomaly,) = [e["data"] for e in events if e["kind"] == "anomaly"]
    assert anomaly["kind"] == "depth_exceeded" and anomaly["action"] == "continue"


def test_another_tenants_turn_has_no_timeline(client: Api, other_client: Api) -> None:
    sid = client.scripted_session({"text": "mine"})
    tid = client.submit(sid, "hi")
    client.wait_turn(tid)
    assert other_client.http.get(f"/v1/turns/{tid}/timeline").status_code == 404


def test_a_turn_waiting_on_a_shared_rate_limit_says_so(client: Api) -> None:
    # gpt-limited-test allows 2 requests per (test-sized) 2-second window across all workers:
    # of four turns started together, at least two wait
    sids = [
        client.create_session(provider="openai", model="gpt-limited-test")["id"] for _ in range(4)
    ]
    tids = [client.submit(sid, f"limited {i} {uuid.uuid4()}") for i, sid in enumerate(sids)]
    assert all(client.wait_turn(t, timeout=60)["status"] == "done" for t in tids)
    waits = [e for t in tids for e in timeline(client, t) if e["kind"] == "rate_limited"]
    assert len({w["data"]["scope"] for w in waits}) == 1 and len(waits) >= 2
    wait = waits[0]
    assert wait["step"] == 1 and wait["data"]["scope"] == "rpm"
    assert wait["data"]["defer_s"] > 0 and wait["data"]["model"] == "gpt-limited-test"
