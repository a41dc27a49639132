"""An agent receives what a non-local provider would: its input redacted (a configured
provider key here, always a secret), and its answer restored. A `python` agent runs on our own
workers, so it runs in mode `local-only` too; an `a2a` agent runs there only at a loopback or
private address (real API, real workers, a real A2A server recording what it receives)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from support import Api

from agents.handlers import WITNESS_DIR

SECRET = "sk-test-openai"  # the fake OpenAI provider's key: redacted as `provider_key`
DONE_TEXT = "Noted."


@pytest.mark.parametrize("mode", ["normal", "local-only"])
def test_a_python_agent_receives_its_input_redacted_and_answers_restored(
    client: Api, mode: str
) -> None:
    tag = uuid.uuid4().hex
    task_text = f"{tag} use the key {SECRET}"
    sid = client.scripted_session(
        {"tool_calls": [{"name": "witness_agent", "arguments": {"task": task_text}}]},
        {"text": DONE_TEXT},
        tools=[],
        agents=["witness"],
        mode=mode,
    )
    turn = client.wait_turn(client.submit(sid, "hand it to the witness"))
    assert turn["status"] == "done", turn.get("error")

    (task,) = client.http.get(f"/v1/sessions/{sid}/tasks").json()
    assert task["status"] == "completed", task.get("error")
    seen = json.loads((WITNESS_DIR / f"{task['id']}.json").read_text())
    assert seen == {"task": f"{tag} use the key [PROVIDER_KEY_1]"}
    assert task["result"] == {"seen": task_text}  # the placeholder put back for the tenant


def _call(client: Api, agent: str, task_text: str, *, mode: str) -> tuple[dict[str, Any], str]:
    """A session whose model calls `agent` with `task_text`: the agent's task, and the
    session."""
    sid = client.scripted_session(
        {"tool_calls": [{"name": f"{agent}_agent", "arguments": {"task": task_text}}]},
        {"text": DONE_TEXT},
        tools=[],
        agents=[agent],
        mode=mode,
    )
    turn = client.wait_turn(client.submit(sid, "hand it over"))
    assert turn["status"] == "done", turn.get("error")
    (task,) = client.http.get(f"/v1/sessions/{sid}/tasks").json()
    return dict(task), sid


@pytest.mark.parametrize("mode", ["normal", "local-only"])
def test_an_a2a_agent_receives_its_input_redacted_and_answers_restored(
    client: Api, a2a_server: Any, mode: str
) -> None:
    tag = uuid.uuid4().hex
    task, _ = _call(client, "translator", f"{tag} key {SECRET}", mode=mode)
    assert task["status"] == "completed", task.get("error")
    received = [m for m in a2a_server.executor.messages if tag in m]
    assert received and all(m == f"{tag} key [PROVIDER_KEY_1]" for m in received)
    assert task["result"] == f"TRANSLATED({tag} key {SECRET})"


def test_a_local_only_session_never_calls_an_a2a_agent_at_a_public_address(
    client: Api,
) -> None:
    task, _ = _call(client, "translator_public", "bonjour", mode="local-only")
    assert task["status"] == "failed"
    assert task["error"]["code"] == "local_only"
    assert "translator.example.com" not in task["error"]["message"]
