"""A `python` agent's handler receives what a non-local provider would: its input redacted
(a configured provider key here, always a secret), also in mode `local-only`, where it runs
because it runs on our own workers; its answer is restored (real API, real workers)."""

from __future__ import annotations

import json
import uuid

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
