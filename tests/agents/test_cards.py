"""Agent cards: GET /v1/agents shows the loaded cards (A2A AgentCard fields where they apply)
and the rejected ones with their reason; a session may only name configured agents."""

from __future__ import annotations

from pathlib import Path

from support import Api

from cortex_workers.agents import load_agents


def test_the_cards_and_the_rejected_ones(client: Api) -> None:
    r = client.http.get("/v1/agents")
    assert r.status_code == 200, r.text
    body = r.json()
    cards = {a["name"]: a for a in body["agents"]}
    research = cards["research"]
    assert research["kind"] == "python"
    assert research["mode"] == "background"
    assert research["tool"] == "research_agent"
    assert research["skills"] == [
        {
            "id": "deep-research",
            "name": "Deep research",
            "description": "Reads many sources and summarises them.",
        }
    ]
    assert research["input_schema"]["required"] == ["task"]
    assert set(research["capabilities"]) == {"streaming", "push_notifications"}
    assert cards["math"]["kind"] == "llm"
    (bad,) = [x for x in body["rejected"] if x["source"].endswith("bad_card.yaml")]
    assert bad["name"] == "Bad Name"
    assert "name" in bad["reason"] and "handler" in bad["reason"]


def test_a_session_naming_an_unknown_agent_is_refused(client: Api) -> None:
    r = client.http.post("/v1/sessions", json={"agents": ["research", "nobody"]})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["code"] == "unknown_agent"
    assert r.json()["error"]["details"] == {"unknown": ["nobody"]}


def test_config_file_cards_and_directory_cards(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("name: alpha\ndescription: A\nkind: python\nhandler: m:f\n")
    (tmp_path / "b.yaml").write_text("- not a mapping\n")
    registry = load_agents(
        tmp_path,
        {
            "beta": {"description": "B", "kind": "a2a", "url": "https://agents.example/b"},
            "alpha": {"description": "again", "kind": "python", "handler": "m:g"},
        },
    )
    assert registry.names() == ["alpha", "beta"]
    assert registry.by_tool("beta_agent") is registry.get("beta")
    reasons = {r.source: r.reason for r in registry.rejected}
    assert "manifest must be a YAML mapping" in reasons[str(tmp_path / "b.yaml")]
    assert "duplicate agent name" in reasons["cortex.toml [agents.alpha]"]
