"""docs/mcp.md's examples: the operator's configuration is valid settings, and the client
example runs against the real stack and prints what the page says."""

from __future__ import annotations

import tomllib

import pytest
from doc_examples import DOCS, run_example
from support import Api

from cortex_workers.mcp_settings import McpSettings

pytestmark = pytest.mark.servers


def test_the_configuration_example_is_valid() -> None:
    page = (DOCS / "mcp.md").read_text()
    toml = page.split("```toml\n", 1)[1].split("\n```", 1)[0]
    settings = McpSettings.model_validate(tomllib.loads(toml)["mcp"])
    weather = settings.servers["weather"]
    assert weather.tools["book_umbrella"].require_confirmation
    assert settings.servers["files"].command == "npx"


def test_the_mcp_page_example_runs(api: Api, tenant_key: str) -> None:
    page, printed = run_example("mcp.md", api, tenant_key)
    tools, agents, answer = printed
    assert tools == "tools: ask list_sessions turn_status"
    assert agents.startswith("agents: ") and "research_agent" in agents.split()  # every card
    assert answer == "answer: done hello over MCP"
    assert f"`{tools}`, then the agents' tools (`agents: research_agent` with" in page
    assert f"then `{answer}`" in page
