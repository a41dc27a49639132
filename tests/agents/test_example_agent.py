"""The agent that ships in examples/agents: docs/agents.md shows its files verbatim, and the
page's coordinator session, posted as written, gets the example's answer in a follow-up turn
(the test run installs the example as the page says: card and module in the agents directory)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from support import Api

from agents.helpers import follow_up_of, tasks

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "agents.md").read_text()
FENCE = re.compile(r"^```(\w+)\n(.*?)^```\n", re.S | re.M)


def _block_of(path: str) -> str:
    """The page's code block that starts with a `# <path>` line, without that line."""
    (body,) = [b for _, b in FENCE.findall(PAGE) if b.startswith(f"# {path}\n")]
    return body.split("\n", 1)[1]


def test_the_page_shows_the_shipped_files_verbatim() -> None:
    for name in ("research.yaml", "research_agent.py"):
        shipped = (ROOT / "examples" / "agents" / name).read_text()
        assert _block_of(f"examples/agents/{name}") == shipped, name


def test_the_pages_coordinator_session_gets_the_example_agents_answer(client: Api) -> None:
    (request,) = [b for k, b in FENCE.findall(PAGE) if k == "json" and '"research_agent"' in b]
    line, body = request.split("\n", 1)
    assert line == "POST /v1/sessions"
    r = client.http.post("/v1/sessions", json=json.loads(body))
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    first = client.wait_turn(client.submit(sid, "research quantum batteries for me"))
    assert first["answer"] == "I've asked the research agent; I'll tell you when it is done."
    task = follow_up_of(client, sid)
    assert task["status"] == "completed", task["error"]
    assert task["result"] == "Research on quantum batteries: 5 sources read, and they agree."
    assert task["progress"] == {"fraction": 1.0, "note": "done"}
    assert [t["agent"] for t in tasks(client, sid)] == ["research"]
    assert task["result"] in client.turn(task["follow_up_turn_id"])["answer"]
