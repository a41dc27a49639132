"""Where the operator's services live is the operator's to know: a tenant's listings of
providers, agents and tools name them, their models and availability, never a provider's
`base_url`, an A2A agent's URL or a directory of the operator's (real API)."""

from __future__ import annotations

import os

import mcp_support
from agents.cards_dir import A2A_PORT, DIRECTORY
from support import Api, Fakes


def test_providers_show_no_base_url(client: Api, fakes: Fakes) -> None:
    r = client.http.get("/v1/providers")
    assert r.status_code == 200, r.text
    providers = {p["name"]: p for p in r.json()}
    assert {"openai", "anthropic", "ollama"} <= set(providers)
    assert all("base_url" not in p for p in providers.values())
    assert providers["openai"]["available"] and "gpt-4o" in providers["openai"]["models"]
    for url in (fakes.env["OPENAI_API_BASE"], fakes.env["ANTHROPIC_BASE_URL"]):
        host_port = url.split("://", 1)[1].split("/", 1)[0]
        assert host_port not in r.text


def test_agents_show_no_url_and_rejected_cards_by_file_name(client: Api) -> None:
    r = client.http.get("/v1/agents")
    assert r.status_code == 200, r.text
    body = r.json()
    translator = next(a for a in body["agents"] if a["name"] == "translator")
    assert translator["kind"] == "a2a" and "url" not in translator
    assert f":{A2A_PORT}" not in r.text
    assert str(DIRECTORY) not in r.text
    assert "bad_card.yaml" in {x["source"] for x in body["rejected"]}


def test_tools_show_rejected_manifests_by_file_name_and_no_mcp_address(client: Api) -> None:
    r = client.http.get("/v1/tools")
    assert r.status_code == 200, r.text
    assert os.environ["CORTEX_PLUGINS_DIR"] not in r.text
    assert all("/" not in x["source"] for x in r.json()["rejected"])
    (guarded,) = [x for x in r.json()["rejected"] if x["source"] == "mcp guarded"]
    assert "allow_private" in guarded["reason"]  # refused by the SSRF guard, and says so
    assert f":{mcp_support.HTTP_PORT}" not in r.text and "127.0.0.1" not in r.text


def test_a_blocked_a2a_call_names_the_agent_not_its_address(client: Api) -> None:
    sid = client.scripted_session(
        {"tool_calls": [{"name": "translator_guarded_agent", "arguments": {"task": "hola"}}]},
        {"text": "Done."},
        tools=[],
        agents=["translator_guarded"],
    )
    assert client.wait_turn(client.submit(sid, "translate hola"))["status"] == "done"
    r = client.http.get(f"/v1/sessions/{sid}/tasks")
    (task,) = r.json()
    assert task["status"] == "failed" and task["error"]["code"] == "blocked_address"
    assert "translator_guarded" in task["error"]["message"]
    assert f":{A2A_PORT}" not in r.text and "127.0.0.1" not in r.text
