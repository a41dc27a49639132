"""Helpers of the agents tests: a scripted coordinator and its tasks."""

from __future__ import annotations

import threading
from typing import Any

from support import Api, Event, wait_until

ACK = "I've asked the research agent; I'll tell you when it is done."


def coordinator(client: Api, agent: str, arguments: dict[str, Any]) -> str:
    return client.scripted_session(
        {"tool_calls": [{"name": f"{agent}_agent", "arguments": arguments}]},
        {"text": ACK},
        tools=[],
        agents=[agent],
    )


def tasks(client: Api, session_id: str) -> list[dict[str, Any]]:
    r = client.http.get(f"/v1/sessions/{session_id}/tasks")
    assert r.status_code == 200, r.text
    return list(r.json())


def follow_up_of(client: Api, session_id: str, *, timeout: float = 60) -> dict[str, Any]:
    """The session's one task, once its follow-up turn has ended."""

    def ended() -> dict[str, Any] | None:
        (task,) = tasks(client, session_id)
        turn_id = task["follow_up_turn_id"]
        if turn_id is None or client.turn(turn_id)["status"] not in ("done", "failed"):
            return None
        return task

    return dict(wait_until(ended, timeout=timeout, interval=0.2, what="the follow-up turn"))


def read_session(client: Api, session_id: str, until_done: int) -> tuple[list[Event], Any]:
    events: list[Event] = []

    def run() -> None:
        events.extend(
            client.events(f"/v1/sessions/{session_id}/events", until_done=until_done, timeout=90)
        )

    reader = threading.Thread(target=run, daemon=True)
    reader.start()
    return events, reader
