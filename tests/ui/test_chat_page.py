"""The chat page in a real browser: Debian's Chromium driven by Playwright (no browser
download; the fixtures are in this folder's conftest)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from playwright.sync_api import Browser, expect
from support import Api, stored_text
from ui.page_support import new_tab

PROPOSE = {
    "name": "propose_action",
    "arguments": {"action": "restart", "product": "web", "rationale": "it is stuck"},
}
SLOW_TEXT = " ".join(f"word{i}" for i in range(50)) + " end."
SCRIPT = [
    {
        "text": "Let me check two things.",
        "tool_calls": [
            {"name": "calculate", "arguments": {"expression": "6 * 7"}},
            {"name": "current_time", "arguments": {}},
        ],
    },
    {
        "text": "I suggest a restart.",
        "tool_calls": [PROPOSE],
    },
    {"text": "Waiting for your decision.", "token_ms": 20},
    {"text": SLOW_TEXT, "token_ms": 80},
]


def test_chat_with_tools_a_proposal_and_a_reload_mid_answer(
    browser: Browser, api: Api, tenant_key: str, artifacts: Path
) -> None:
    tab = new_tab(browser)
    page = tab.page
    response = page.goto(f"{api.base_url}/ui/")
    assert response is not None and response.ok
    csp = response.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src 'self'" in csp and "unsafe" not in csp

    page.get_by_label("API key").fill(tenant_key)
    page.get_by_role("button", name="Open", exact=True).click()
    # a tenant without sessions finds the new-session form open
    expect(page.get_by_text("No sessions yet")).to_be_visible()
    page.get_by_label("Name", exact=True).fill("browser test")
    page.get_by_label("Metadata").fill(json.dumps({"script": SCRIPT}))
    page.get_by_role("button", name="Create").click()
    expect(page.get_by_role("heading", name="browser test")).to_be_visible()
    expect(page.get_by_role("link", name="browser test")).to_be_visible()

    page.get_by_label("Message").fill("check things")
    page.get_by_role("button", name="Send").click()
    turn = page.locator(".turn").last
    expect(turn.locator(".assistant").first).to_have_text("Let me check two things.")
    rows = turn.locator(".tools").first.locator(".tool[data-severity]")  # the first step's
    expect(rows).to_have_count(2)
    expect(turn.get_by_role("button", name=re.compile("^calculate ok"))).to_be_visible()
    card = turn.locator(".proposal")
    expect(card).to_contain_text("Proposed: restart on web")
    expect(turn).to_have_attribute("data-status", "done")
    page.screenshot(path=str(artifacts / "chat-tools-proposal.png"), full_page=True)
    card.get_by_role("button", name="Confirm").click()
    expect(card.locator(".status")).to_have_text(re.compile(r"Status: (confirmed|execut)"))
    expect(card.get_by_role("button", name="Confirm")).to_have_count(0)

    # the next answer is slow: reload while it streams, by keyboard this time
    page.get_by_label("Message").focus()
    page.keyboard.type("and now slowly")
    page.keyboard.press("Control+Enter")
    expect(page.locator(".turn")).to_have_count(2)
    slow = page.locator(".turn").last
    expect(slow.locator(".bubble.user")).to_have_text("and now slowly")
    expect(slow.locator(".assistant").first).to_contain_text("word3")
    expect(page.get_by_role("button", name="Cancel turn")).to_be_visible()
    turn_id = slow.get_attribute("data-turn-id")
    assert turn_id
    page.reload()
    # the sidebar shows the session's last activity as stored, not only what this tab saw
    when = page.get_by_role("link", name="browser test").locator(".session-when")
    expect(when).to_have_text(re.compile(r"^active "))
    slow = page.locator(f".turn[data-turn-id='{turn_id}']")
    expect(slow).to_have_attribute("data-status", "done", timeout=60_000)
    shown = "".join(slow.locator(".assistant").all_text_contents())
    sid = page.evaluate("new URLSearchParams(location.hash.slice(1)).get('session')")
    with api.as_tenant(tenant_key) as client:
        assert shown == stored_text(client.messages(sid), turn_id) == SLOW_TEXT
        confirmed = client.http.get(f"/v1/sessions/{sid}/proposals").json()
        assert confirmed[0]["status"] != "pending"
    expect(page.get_by_role("button", name="Cancel turn")).to_be_hidden()
    # after the reload the earlier turn is rebuilt from the stored history: no text twice
    first = page.locator(".turn").first
    expect(first.locator(".tools").first.locator(".tool[data-severity]")).to_have_count(2)
    assert "".join(first.locator(".assistant").all_text_contents()).count("Let me check") == 1
    page.screenshot(path=str(artifacts / "chat-after-reload.png"), full_page=True)
    assert tab.problems == []


def test_an_embed_link_with_a_read_token_shows_the_conversation_and_cannot_post(
    browser: Browser, client: Api, artifacts: Path
) -> None:
    sid = client.scripted_session(
        {"text": "Here is what I found.", "tool_calls": [PROPOSE]},
        {"text": "All clear."},
        name="shared view",
    )
    tid = client.submit(sid, "what happened?")
    assert client.wait_turn(tid)["status"] == "done"
    r = client.http.post(f"/v1/sessions/{sid}/tokens", json={"scope": "read", "ttl_s": 600})
    token = r.json()["token"]

    tab = new_tab(browser, width=375)
    page = tab.page
    page.goto(f"{client.base_url}/ui/#session={sid}&token={token}")
    expect(page.get_by_role("heading", name="shared view")).to_be_visible()
    expect(page.locator(".bubble.user")).to_have_text("what happened?")
    expect(page.locator(".assistant").last).to_have_text("All clear.")
    expect(page.locator(".proposal")).to_contain_text("Status: pending")
    expect(page.get_by_role("button", name="Confirm")).to_have_count(0)
    expect(page.locator("#composer")).to_be_hidden()
    expect(page.get_by_text("can read the conversation but not write")).to_be_visible()
    expect(page.locator("#sessions-pane")).to_be_hidden()
    assert tab.problems == []
    status = page.evaluate(
        """async ([sid, token]) => (await fetch(`/v1/sessions/${sid}/turns`, {
            method: "POST", headers: {Authorization: `Bearer ${token}`,
            "Content-Type": "application/json"}, body: JSON.stringify({content: "hi"})})).status""",
        [sid, token],
    )
    assert status == 403
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    page.screenshot(path=str(artifacts / "embed-read-375px.png"), full_page=True)
    assert [m["role"] for m in client.messages(sid)].count("user") == 1
    # decided elsewhere: the card follows live
    pid = client.http.get(f"/v1/sessions/{sid}/proposals").json()[0]["id"]
    assert client.http.post(f"/v1/proposals/{pid}/reject").status_code == 200
    expect(page.locator(".proposal .status")).to_have_text("Status: rejected")

    # the same link with a chat token may write
    r = client.http.post(f"/v1/sessions/{sid}/tokens", json={"scope": "chat", "ttl_s": 600})
    page.goto(f"{client.base_url}/ui/#session={sid}&token={r.json()['token']}")
    page.reload()
    expect(page.get_by_label("Message")).to_be_visible()
    page.get_by_label("Message").fill("one more")
    page.get_by_role("button", name="Send").click()
    expect(page.locator(".turn").last).to_have_attribute("data-status", "done")
    expect(page.locator(".turn").last.locator(".assistant").last).to_have_text("one more")
