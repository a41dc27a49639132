"""The turn inspector of a turn whose model step was retried: one bar per step, the retry marked
on the retried step's bar, and the timeline's events listed; opened from an embed link (a
session token may read the turn and its timeline)."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Browser, expect
from support import Api
from ui.page_support import box, new_tab, shoot


def test_a_retried_step_in_the_waterfall(browser: Browser, client: Api, artifacts: Path) -> None:
    sid = client.scripted_session(
        {
            "text": "Let me compute.",
            "tool_calls": [{"name": "calculate", "arguments": {"expression": "2 + 2"}}],
            "error": {"status": 503, "message": "overloaded", "times": 1},
        },
        {"text": "It is 4."},
        name="retried",
    )
    tid = client.submit(sid, "2 + 2?")
    turn = client.wait_turn(tid)
    assert turn["status"] == "done"
    steps = sorted(turn["steps"], key=lambda s: s["step_no"])
    assert steps[0]["attempt"] == 2
    token = client.http.post(f"/v1/sessions/{sid}/tokens", json={"scope": "read"}).json()["token"]

    tab = new_tab(browser)
    page = tab.page
    page.goto(f"{client.base_url}/ui/#session={sid}&token={token}")
    expect(page.locator(".turn").first).to_have_attribute("data-status", "done")
    page.get_by_role("button", name="Inspect turn 1", exact=True).focus()
    page.keyboard.press("Enter")
    dialog = page.get_by_role("dialog", name="Turn 1")
    rows = dialog.get_by_role("list", name="Steps").get_by_role("listitem")
    expect(rows).to_have_count(len(steps))
    expect(dialog.locator(".bar:not(.key)")).to_have_count(len(steps))  # not the legend
    retried = rows.first
    expect(retried).to_contain_text("attempt 2")
    mark = retried.locator(".mark-retry")
    expect(mark).to_have_count(1)
    assert box(retried.locator(".wf-track")).holds(box(mark), slack=8)
    expect(rows.nth(1)).to_have_attribute("data-kind", "tool")
    table = dialog.get_by_role("table", name="Timeline events")
    expect(table.locator("tr[data-kind=retry]")).to_have_count(1)
    expect(table).to_contain_text("completion")
    shoot(page, artifacts, "inspector-retry")
    dialog.get_by_role("button", name="Close inspector").click()
    expect(dialog).to_be_hidden()
    assert tab.problems == []
