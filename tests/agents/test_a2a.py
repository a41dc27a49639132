"""A remote agent speaking A2A (a real a2a-sdk server on loopback, allowed as a private host by
its card): one foreground and one background call; a card without `allow_private` is refused
by the SSRF guard before anything is sent (tests/agents/test_a2a_guard.py: the rest of the
guard)."""

from __future__ import annotations

from typing import Any

from support import Api

from agents.helpers import ACK, coordinator, follow_up_of, tasks


def _foreground(client: Api, agent: str) -> tuple[dict[str, Any], dict[str, Any]]:
    sid = client.scripted_session(
        {"tool_calls": [{"name": f"{agent}_agent", "arguments": {"task": "bonjour"}}]},
        {"text": "Here is the translation."},
        tools=[],
        agents=[agent],
    )
    turn = client.wait_turn(client.submit(sid, "translate bonjour"))
    (task,) = tasks(client, sid)
    (tool,) = [m for m in client.messages(sid) if m["role"] == "tool"]
    return turn, {**task, "tool_message": tool}


def test_a_foreground_call_reads_the_remote_agents_answer(client: Api, a2a_server: Any) -> None:
    turn, task = _foreground(client, "translator")
    assert turn["status"] == "done"
    assert task["status"] == "completed"
    assert task["result"] == "TRANSLATED(bonjour)"
    assert task["tool_message"]["content"] == "TRANSLATED(bonjour)"
    assert a2a_server.executor.messages.count("bonjour") >= 1


def test_a_background_call_is_followed_up(client: Api, a2a_server: Any) -> None:
    sid = coordinator(client, "translator_bg", {"task": "guten tag"})
    turn = client.wait_turn(client.submit(sid, "translate guten tag, no hurry"))
    assert turn["answer"] == ACK
    task = follow_up_of(client, sid)
    assert task["status"] == "completed"
    assert task["result"] == "TRANSLATED(guten tag)"
    assert "TRANSLATED(guten tag)" in client.turn(task["follow_up_turn_id"])["answer"]
    assert a2a_server.executor.messages.count("guten tag") == 1  # sent once


def test_a_private_host_is_refused_unless_the_card_allows_it(client: Api, a2a_server: Any) -> None:
    before = len(a2a_server.requests)
    turn, task = _foreground(client, "translator_guarded")
    assert a2a_server.requests[before:] == []  # refused before anything was sent
    assert turn["status"] == "done"
    assert task["status"] == "failed"
    assert task["error"]["code"] == "blocked_address"
    assert "allow_private: true" in task["error"]["message"]
    assert task["tool_message"]["is_error"] is True
