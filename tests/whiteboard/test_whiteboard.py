"""The whiteboard: the coordinator's tools write it (a scripted coordinator calls them), the
API returns it, and its summary is in the model's context at the next step."""

from __future__ import annotations

import uuid
from typing import Any

from support import Api

from cortex_workers.runtime import get_runtime
from cortex_workers.store.db import transaction
from cortex_workers.whiteboard import apply_whiteboard_suggestion, whiteboard_summary


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def test_the_coordinator_tools_write_the_board_and_the_model_reads_it(client: Api) -> None:
    sid = client.scripted_session(
        {
            "tool_calls": [
                _call("update_mission", mission="Ship the v2 release", focus="release notes"),
                _call("manage_blocker", action="open", text="CI is red on main"),
                _call("log_decision", decision="Freeze features", rationale="date is fixed"),
                _call("update_progress", note="notes half written", percent=50),
            ]
        },
        {"text": "Board updated.", "echo_context": True},
        whiteboard=True,
        tools=["calculate"],
    )
    turn = client.wait_turn(client.submit(sid, "plan the release"))
    assert turn["status"] == "done", turn
    assert [c["is_error"] for c in turn["tool_calls"]] == [False] * 4, turn["tool_calls"]

    r = client.http.get(f"/v1/sessions/{sid}/whiteboard")
    assert r.status_code == 200, r.text
    board = r.json()
    assert board["mission"] == "Ship the v2 release"
    assert board["focus"] == "release notes"
    assert board["progress"] == {"percent": 50, "note": "notes half written"}
    [blocker] = board["blockers"]
    assert (blocker["text"], blocker["status"], blocker["source"]) == (
        "CI is red on main",
        "open",
        "coordinator",
    )
    [decision] = board["decisions"]
    assert (decision["text"], decision["detail"]) == ("Freeze features", "date is fixed")
    assert sorted(u["kind"] for u in board["updates"]) == [
        "blocker",
        "decision",
        "mission",
        "progress",
    ]

    # the step after the tool calls was sent the board's summary as a system message
    answer = turn["answer"]
    assert answer.startswith("Board updated.")
    assert "Team whiteboard" in answer
    assert "Mission: Ship the v2 release" in answer
    assert f"#{blocker['id']} CI is red on main" in answer
    assert "Freeze features" in answer and "50%" in answer


def test_get_team_status_reads_the_board_back_to_the_model(client: Api) -> None:
    sid = client.scripted_session(
        {"tool_calls": [_call("update_mission", mission="Find the leak")]},
        {"tool_calls": [_call("get_team_status")]},
        {"text": "ok"},
        whiteboard=True,
    )
    turn = client.wait_turn(client.submit(sid))
    assert turn["status"] == "done", turn
    status = turn["tool_calls"][-1]
    assert status["name"] == "get_team_status" and not status["is_error"]
    assert '"mission": "Find the leak"' in status["result"]


def test_a_session_without_a_whiteboard_has_none(client: Api) -> None:
    sid = client.scripted_session(
        {"tool_calls": [_call("update_mission", mission="not mine")]},
        {"text": "after", "echo_context": True},
    )
    turn = client.wait_turn(client.submit(sid))
    assert turn["status"] == "done", turn
    [call] = turn["tool_calls"]
    assert call["is_error"] and "no whiteboard" in (call["result"] or call["error"] or "")
    assert "Team whiteboard" not in turn["answer"]
    r = client.http.get(f"/v1/sessions/{sid}/whiteboard")
    assert r.status_code == 404 and r.json()["error"]["code"] == "no_whiteboard"


def test_another_tenant_cannot_read_the_board(client: Api, other_client: Api) -> None:
    created = client.create_session(whiteboard=True)
    sid = created["id"]
    assert created["whiteboard"] is True and client.create_session()["whiteboard"] is False
    assert client.http.get(f"/v1/sessions/{sid}").json()["whiteboard"] is True
    assert client.http.get(f"/v1/sessions/{sid}/whiteboard").status_code == 200
    assert other_client.http.get(f"/v1/sessions/{sid}/whiteboard").status_code == 404


def test_a_sub_agents_suggestion_is_applied_and_stripped(client: Api) -> None:
    sid = uuid.UUID(client.create_session(whiteboard=True)["id"])
    rt = get_runtime()
    with transaction(rt.db) as db:
        answer = apply_whiteboard_suggestion(
            db,
            sid,
            "Three hosts fail.\n\n```whiteboard_suggestion\n"
            '{"progress": "found the failing hosts", "percent": 60,'
            ' "blocker": "no credentials for host C", "decision": "skip host C today"}\n```\n',
            source="agent:research",
        )
    assert answer == "Three hosts fail."
    board = client.http.get(f"/v1/sessions/{sid}/whiteboard").json()
    assert board["progress"] == {"percent": 60, "note": "found the failing hosts"}
    [blocker] = board["blockers"]
    assert blocker["source"] == "agent:research" and blocker["status"] == "open"
    assert [d["text"] for d in board["decisions"]] == ["skip host C today"]

    with transaction(rt.db) as db:  # a later suggestion resolves the blocker
        apply_whiteboard_suggestion(
            db,
            sid,
            f'done\n```whiteboard_suggestion\n{{"resolve_blocker": {blocker["id"]},'
            ' "resolution": "got them"}\n```',
            source="agent:ops",
        )
    [blocker] = client.http.get(f"/v1/sessions/{sid}/whiteboard").json()["blockers"]
    assert (blocker["status"], blocker["resolution"]) == ("resolved", "got them")


def test_a_malformed_suggestion_is_left_in_the_answer(client: Api) -> None:
    sid = uuid.UUID(client.create_session(whiteboard=True)["id"])
    text = 'answer\n```whiteboard_suggestion\n{"unknown_key": 1}\n```'
    with transaction(get_runtime().db) as db:
        assert apply_whiteboard_suggestion(db, sid, text) == text
        assert apply_whiteboard_suggestion(db, sid, "plain answer") == "plain answer"
    assert client.http.get(f"/v1/sessions/{sid}/whiteboard").json()["updates"] == []


def test_the_summary_a_sub_agents_context_gets(client: Api) -> None:
    """What the child turn's context builder adds: the parent's board summary (None for a
    parent without a whiteboard)."""
    plain = uuid.UUID(client.create_session()["id"])
    sid = uuid.UUID(client.create_session(whiteboard=True)["id"])
    with transaction(get_runtime().db) as db:
        assert whiteboard_summary(db, plain) is None
        apply_whiteboard_suggestion(db, sid, 'x\n```whiteboard_suggestion\n{"note": "n1"}\n```')
        summary = whiteboard_summary(db, sid)
    assert summary is not None
    assert "Mission: (not set)" in summary and "n1" in summary and "Open blockers: none" in summary


def test_sub_agents_read_the_board_and_their_suggestions_land_on_it(client: Api) -> None:
    sid = client.scripted_session(
        {"tool_calls": [_call("update_mission", mission="Map the outage")]},
        {"tool_calls": [_call("wb_scout_agent", task="look around")]},
        {"tool_calls": [_call("wb_reporter_agent", task="report back")]},
        {"text": "All done.", "echo_context": True},
        whiteboard=True,
        tools=[],
        agents=["wb_scout", "wb_reporter"],
    )
    turn = client.wait_turn(client.submit(sid, "coordinate"))
    assert turn["status"] == "done", turn
    tool_messages = [m for m in client.messages(sid) if m["role"] == "tool"]
    scout, reporter = (m["content"] for m in tool_messages if m["name"] != "update_mission")
    # the sub-agent's model was sent its parent's whiteboard summary
    assert scout.startswith("Scouted.")
    assert "Team whiteboard" in scout and "Mission: Map the outage" in scout
    # the suggestion was applied to the parent's board and taken out of the answer
    assert reporter == "Reported."
    board = client.http.get(f"/v1/sessions/{sid}/whiteboard").json()
    [blocker] = board["blockers"]
    assert (blocker["text"], blocker["source"]) == ("host C unreachable", "agent:wb_reporter")
    notes = [u for u in board["updates"] if u["kind"] == "note"]
    assert [(n["text"], n["source"]) for n in notes] == [("scouting done", "agent:wb_reporter")]
    # and the coordinator's next step saw it
    assert f"#{blocker['id']} host C unreachable" in turn["answer"]
