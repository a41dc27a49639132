"""Every end of a background task is told to the user in a follow-up turn, once: a failing
agent, one that runs out of time, a cancelled task, and a task whose worker is SIGKILLed."""

from __future__ import annotations

import time
import uuid
from typing import Any

from support import Api, Workers, wait_until

from agents.helpers import ACK, coordinator, follow_up_of, tasks


def _started(client: Api, sid: str, content: str = "go") -> None:
    turn = client.wait_turn(client.submit(sid, content))
    assert turn["answer"] == ACK


def _turns_of(client: Api, sid: str) -> list[str]:
    seen: list[str] = []
    for m in client.messages(sid):
        if m["turn_id"] not in seen:
            seen.append(m["turn_id"])
    return seen


def _working(client: Api, sid: str) -> dict[str, Any]:
    return dict(
        wait_until(
            lambda: next((t for t in tasks(client, sid) if t["progress"]), None),
            timeout=30,
            what="the handler to report progress",
        )
    )


def test_a_failing_agent_is_told_to_the_user(client: Api) -> None:
    sid = coordinator(client, "broken", {"task": "fetch the archive"})
    _started(client, sid)
    task = follow_up_of(client, sid)
    assert task["status"] == "failed"
    assert task["error"]["code"] == "agent_error"
    assert "the archive is unreachable" in task["error"]["message"]
    answer = client.turn(task["follow_up_turn_id"])["answer"]
    assert "has failed" in answer and "the archive is unreachable" in answer


def test_an_agent_out_of_time_is_told_to_the_user(client: Api) -> None:
    sid = coordinator(client, "sleepy", {"seconds": 8})
    _started(client, sid)
    task = follow_up_of(client, sid)
    assert task["status"] == "failed"
    assert task["error"]["code"] == "timeout"
    answer = client.turn(task["follow_up_turn_id"])["answer"]
    assert "has failed" in answer and "did not answer within 2 s" in answer


def test_cancel_a_working_task(client: Api) -> None:
    sid = coordinator(client, "research", {"task": "a long question"})
    _started(client, sid)
    task = _working(client, sid)
    r = client.http.post(f"/v1/tasks/{task['id']}/cancel")
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "canceled"
    again = client.http.post(f"/v1/tasks/{task['id']}/cancel")
    assert again.status_code == 200 and again.json()["status"] == "canceled"
    task = follow_up_of(client, sid)
    assert task["status"] == "canceled"
    assert task["result"] is None
    assert "has canceled" in client.turn(task["follow_up_turn_id"])["answer"]
    unknown = client.http.post("/v1/tasks/00000000-0000-0000-0000-000000000000/cancel")
    assert unknown.status_code == 404


def test_a_sigkilled_agents_worker_gives_one_result_and_one_follow_up(
    client: Api, workers: Workers
) -> None:
    sid = coordinator(client, "research", {"task": "resilience"})
    _started(client, sid)
    _working(client, sid)
    workers.kill("agents")
    workers.start("agents")
    task = follow_up_of(client, sid, timeout=90)
    assert task["status"] == "completed"
    assert task["result"] == "Research on resilience: 5 sources read, and they agree."
    # the redelivered message and the reconciler's re-send ran the task again, once
    wait_until(lambda: client.turn(task["follow_up_turn_id"])["status"] == "done")
    (only,) = tasks(client, sid)
    assert only["follow_up_turn_id"] == task["follow_up_turn_id"]
    turns = _turns_of(client, sid)
    assert len(turns) == 2 and turns[-1] == task["follow_up_turn_id"]


def test_redelivered_task_messages_give_one_result_and_one_follow_up(client: Api) -> None:
    from cortex_workers.dispatch import publish
    from cortex_workers.turns.steps import AgentTaskRef

    sid = coordinator(client, "research", {"task": "duplicates"})
    _started(client, sid)
    task = _working(client, sid)
    ref = AgentTaskRef(uuid.UUID(task["id"]))
    assert publish([ref, ref]) == 2  # while a runner holds it: claimed by nobody else
    task = follow_up_of(client, sid)
    assert task["status"] == "completed"
    assert publish([ref]) == 1  # after its end: nothing
    wait_until(lambda: client.turn(task["follow_up_turn_id"])["status"] == "done")
    time.sleep(2)  # room for a wrong second follow-up to appear
    assert len(_turns_of(client, sid)) == 2
    (only,) = tasks(client, sid)
    assert only["follow_up_turn_id"] == task["follow_up_turn_id"]
    assert only["finished_at"] == task["finished_at"]
