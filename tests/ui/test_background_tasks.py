"""A background agent task in the chat page: its row shows the agent, its status and a progress
bar as the agent reports progress; its answer arrives as a follow-up turn; after a reload the
task is listed again (read with the API key)."""

from __future__ import annotations

import re
from pathlib import Path

from agents.helpers import ACK, coordinator
from playwright.sync_api import Browser, expect
from support import Api
from ui.page_support import new_tab, shoot


def test_a_background_task_with_its_progress(
    browser: Browser, client: Api, tenant_key: str, artifacts: Path
) -> None:
    sid = coordinator(client, "research", {"task": "quantum batteries"})
    tab = new_tab(browser)
    page = tab.page
    page.goto(f"{client.base_url}/ui/#session={sid}")
    page.get_by_label("API key").fill(tenant_key)
    page.get_by_role("button", name="Open", exact=True).click()
    page.get_by_label("Message").fill("research quantum batteries for me")
    page.get_by_role("button", name="Send").click()
    expect(page.locator(".turn").first.locator(".assistant").last).to_have_text(ACK)

    tasks = page.get_by_role("region", name="Background tasks")
    expect(tasks).to_be_visible()
    bar = tasks.get_by_role("progressbar", name="Progress of research")
    expect(bar).to_be_visible()
    expect(tasks).to_contain_text(re.compile(r"reading source \d"))
    shoot(page, artifacts, "task-progress")
    # the example agent reads its five sources a second each
    expect(tasks.locator("[data-status]")).to_have_attribute(
        "data-status", "completed", timeout=60_000
    )
    assert bar.evaluate("e => e.value") == 1
    result = "Research on quantum batteries: 5 sources read, and they agree."
    follow_up = page.locator(".turn").filter(has=page.locator(".assistant", has_text=result))
    expect(follow_up).to_have_count(1, timeout=30_000)  # a turn of its own, after the first
    first = page.locator(".turn").first.get_attribute("data-turn-id")
    assert follow_up.get_attribute("data-turn-id") != first

    page.reload()
    expect(tasks.locator("[data-status]")).to_have_attribute("data-status", "completed")
    expect(bar).to_be_visible()
    shoot(page, artifacts, "task-after-reload")
    assert tab.problems == []
