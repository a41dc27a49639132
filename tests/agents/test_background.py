"""A coordinator calls a background python agent: the turn ends with its acknowledgement, the
user keeps chatting, and the agent's answer arrives later as a follow-up turn on the session
stream and in the history."""

from __future__ import annotations

import pytest
from support import Api, text_of

from agents.helpers import ACK, coordinator, follow_up_of, read_session, tasks

pytestmark = pytest.mark.servers


def test_the_answer_arrives_later_as_a_new_assistant_message(client: Api) -> None:
    sid = coordinator(client, "research", {"task": "quantum batteries"})
    hook = {"url": "http://127.0.0.1:9/hooks", "events": ["task.completed"]}
    webhook = client.http.post("/v1/webhooks", json=hook)
    assert webhook.status_code == 201, webhook.text
    events, reader = read_session(client, sid, until_done=4)

    first = client.wait_turn(client.submit(sid, "research quantum batteries for me"))
    assert first["status"] == "done"
    assert first["answer"] == ACK
    (task,) = tasks(client, sid)
    assert task["agent"] == "research"
    assert task["input"] == {"task": "quantum batteries"}
    assert task["status"] in ("submitted", "working")

    chat = [client.wait_turn(client.submit(sid, f"meanwhile, question {i}")) for i in (1, 2)]
    assert [t["answer"] for t in chat] == ["meanwhile, question 1", "meanwhile, question 2"]

    task = follow_up_of(client, sid)
    assert task["status"] == "completed"
    assert task["result"] == "Research on quantum batteries: 5 sources read, and they agree."
    assert task["progress"]["fraction"] == 1.0
    assert all(t["finished_at"] < task["finished_at"] for t in chat)  # answered meanwhile

    follow_up = client.turn(task["follow_up_turn_id"])
    assert follow_up["status"] == "done"
    assert follow_up["trigger"] == {"kind": "task", "task_id": task["id"]}
    assert first["trigger"] is None
    assert task["result"] in follow_up["answer"]

    reader.join(60)
    assert not reader.is_alive()
    turns = [e.data["turn"] for e in events if e.event == "done"]
    assert turns == [first["id"], *(t["id"] for t in chat), follow_up["id"]]
    streamed = text_of([e for e in events if e.data.get("turn") == follow_up["id"]])
    assert streamed == follow_up["answer"]
    states = [e.data["status"] for e in events if e.event == "task"]
    assert states[-1] == "completed" and "working" in states
    assert any(e.data.get("progress") for e in events if e.event == "task")

    history = client.messages(sid)
    mine = [m for m in history if m["turn_id"] == follow_up["id"]]
    assert [m["role"] for m in mine] == ["assistant"]  # no user message: a task's turn
    assert mine[0]["content"] == follow_up["answer"]
    assert history[-1]["turn_id"] == follow_up["id"]

    # the application's backend hears of the task's end through its webhook (docs/webhooks.md)
    hook_id = webhook.json()["id"]
    deliveries = client.http.get(f"/v1/webhooks/{hook_id}/deliveries").json()
    assert [d["event_type"] for d in deliveries] == ["task.completed"]
    assert client.http.delete(f"/v1/webhooks/{hook_id}").status_code == 204
