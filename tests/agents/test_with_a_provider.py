"""A real provider's wire (the fake OpenAI server): the session's agents are offered to the
model as `<name>_agent` function tools with the card's input schema, and the model's call of
one runs the agent."""

from __future__ import annotations

import json
import uuid

from support import Api, Fakes


def test_the_model_is_offered_the_agents_and_calls_one(client: Api, fakes: Fakes) -> None:
    content = f"look it up {uuid.uuid4()}"
    call = {"name": "lookup_agent", "arguments": {"task": "the speed of light"}}
    fakes.openai.enqueue(content, {"tool_calls": [call]}, {"text": "It is c."})
    sid = client.create_session(
        provider="openai", model="gpt-4o-mini", tools=[], agents=["lookup", "research"]
    )["id"]
    turn = client.wait_turn(client.submit(sid, content))
    assert turn["status"] == "done" and turn["answer"] == "It is c."

    first, second = fakes.openai.requests_for(content)
    offered = {t["function"]["name"]: t["function"] for t in first.body["tools"]}
    assert set(offered) == {"lookup_agent", "research_agent"}
    assert offered["lookup_agent"]["parameters"]["required"] == ["task"]
    assert "background" in offered["research_agent"]["description"]
    (tool,) = [m for m in second.body["messages"] if m["role"] == "tool"]
    assert "lookup of the speed of light" in tool["content"]
    (task,) = client.http.get(f"/v1/sessions/{sid}/tasks").json()
    assert json.loads(tool["content"].split("\n", 1)[1].rsplit("\n", 1)[0]) == task["result"]
