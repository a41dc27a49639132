"""A new user's first hour with the chat page, in Debian's Chromium: signed out nothing of the
workspace shows; sign in; create a session from the form with the demo script; chat; open a tool
row (it stays within its row); confirm the proposal; reload in the middle of an answer (the card
stays in its place, every turn keeps its "done · tokens · cost" line); open the turn inspector
(one bar per step). Screenshots of each stage are kept (see conftest)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from playwright.sync_api import Browser, Locator, Page, expect
from support import Api
from ui.page_support import box, display, new_tab, shoot

from cortex_workers.api.routes.ui import UI_DIR
from cortex_workers.whiteboard import WHITEBOARD_TOOLS

DONE_LINE = re.compile(r"^done · \d+ tokens in, \d+ out · \$\d")
PATTERN = re.compile(r"[*?\[\]]")


def test_the_page_knows_the_whiteboard_only_tools() -> None:
    """The form leaves out what only a whiteboard session is offered: the page's list is ours."""
    source = (UI_DIR / "sessions.js").read_text()
    listed = re.search(r"WHITEBOARD_TOOLS = (\[[^\]]*\])", source)
    assert listed is not None
    assert sorted(json.loads(listed.group(1))) == sorted(WHITEBOARD_TOOLS)


def _signed_out(page: Page) -> None:
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    expect(page.get_by_label("API key")).to_be_focused()
    for hidden in (
        page.get_by_role("navigation", name="Sessions"),
        page.get_by_label("Search sessions"),
        page.get_by_label("Message"),
        page.get_by_role("button", name="Send"),
        page.get_by_role("button", name="Sign out"),
    ):
        expect(hidden).to_be_hidden()
    # `hidden` wins over the page's display rules (grid, flex)
    assert display(page.locator("#workspace")) == "none"
    assert display(page.locator("#chat")) == "none"


def _create_from_the_form(page: Page) -> None:
    expect(page.get_by_text("No sessions yet")).to_be_visible()
    expect(page.get_by_role("button", name="Create")).to_be_enabled()  # the choices are loaded
    models = page.get_by_label("Provider and model").locator("option")
    labels = models.evaluate_all("os => os.map(o => o.textContent)")
    assert labels, "no model to choose"
    for label in labels:
        provider, _, model = label.partition(" / ")
        assert model.strip() and not PATTERN.search(model), f"not a model one can ask for: {label}"
    tools = page.get_by_role("group", name="Tools", exact=True)
    for name in WHITEBOARD_TOOLS:
        expect(tools.get_by_role("checkbox", name=name, exact=True)).to_have_count(0)
    expect(tools.get_by_role("checkbox", name="calculate", exact=True)).to_be_checked()
    expect(tools.get_by_role("checkbox", name="slow_tool", exact=True)).not_to_be_checked()
    page.get_by_label("Name", exact=True).fill("first hour")
    page.get_by_role("button", name="Use a demo script").click()
    expect(page.get_by_label("Metadata")).to_have_value(re.compile('"script"'))
    page.get_by_role("button", name="Create").click()
    expect(page.get_by_role("heading", name="first hour")).to_be_visible()
    expect(page.get_by_role("navigation", name="Sessions").get_by_role("link")).to_have_count(1)


def _open_a_tool_row(page: Page, turn: Locator, artifacts: Path) -> None:
    """The row opens below its heading, inside its list; its neighbour keeps its size."""
    calculate = turn.get_by_role("button", name=re.compile("^calculate ok"))
    clock = turn.get_by_role("button", name=re.compile("^current_time ok"))
    expect(calculate).to_be_visible()
    expect(clock).to_be_visible()
    row, neighbour = calculate.locator(".."), clock.locator("..")
    listing = row.locator("..")
    before = box(neighbour)
    calculate.click()
    expect(calculate).to_have_attribute("aria-expanded", "true")
    expect(row.get_by_text('{"result": 42}')).to_be_visible()
    assert box(listing).holds(box(row)), "the open tool row spills out of its list"
    assert box(row).holds(box(row.locator(".tool-detail"))), "its details spill out of the row"
    after = box(neighbour)
    assert abs(after.height - before.height) < 1 and abs(after.width - before.width) < 1
    assert row.evaluate("e => parseFloat(getComputedStyle(e).borderTopLeftRadius)") < 20
    shoot(page, artifacts, "3-tool-row-open")
    calculate.press("Enter")  # by keyboard: closes again
    expect(calculate).to_have_attribute("aria-expanded", "false")


def _card_in_place(turn: Locator) -> None:
    """The proposal card follows the tool rows of the call that made it, before the answer."""
    order = turn.locator(".turn-body").evaluate(
        """body => [...body.children].map(c => c.classList.contains('proposal') ? 'card'
             : c.classList.contains('tools') ? 'tools'
             : c.classList.contains('assistant') ? 'answer' : 'other')"""
    )
    card = order.index("card")
    assert "tools" in order[:card] and order[-1] == "answer", order
    assert order[card - 1] == "tools", order


def _reload_mid_answer(page: Page, artifacts: Path) -> Locator:
    page.get_by_label("Message").fill("tell me more")
    page.get_by_label("Message").press("Control+Enter")
    second = page.locator(".turn").nth(1)
    expect(second.get_by_role("heading", name="What happened")).to_be_visible()
    expect(page.get_by_role("button", name="Cancel turn")).to_be_visible()
    shoot(page, artifacts, "4-streaming")
    page.reload()
    second = page.locator(".turn").nth(1)
    expect(second).to_have_attribute("data-status", "done", timeout=60_000)
    expect(second.get_by_role("heading", name="What happened")).to_have_count(1)
    expect(second.get_by_role("listitem")).to_have_count(2)
    expect(second.locator("blockquote")).to_contain_text("Durable by design")
    return second


def _inspect(page: Page, client: Api, turn_id: str, artifacts: Path) -> None:
    steps = client.turn(turn_id)["steps"]
    page.get_by_role("button", name="Inspect turn 1", exact=True).click()
    dialog = page.get_by_role("dialog", name="Turn 1")
    expect(dialog).to_be_visible()
    rows = dialog.get_by_role("list", name="Steps").get_by_role("listitem")
    expect(rows).to_have_count(len(steps))
    for i, step in enumerate(sorted(steps, key=lambda s: s["step_no"])):
        row = rows.nth(i)
        expect(row.locator(".bar")).to_have_count(1)
        expect(row).to_have_attribute("data-kind", step["kind"])
        bar, track = box(row.locator(".bar")), box(row.locator(".wf-track"))
        assert bar.width > 0 and track.holds(bar, slack=2), (step, bar, track)
    expect(dialog.get_by_role("table", name="Timeline events")).to_contain_text("route")
    shoot(page, artifacts, "6-inspector")
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()


def test_the_first_hour(browser: Browser, api: Api, tenant_key: str, artifacts: Path) -> None:
    tab = new_tab(browser)
    page = tab.page
    response = page.goto(f"{api.base_url}/ui/")
    assert response is not None and response.ok
    assert "script-src 'self'" in response.headers["content-security-policy"]
    _signed_out(page)
    shoot(page, artifacts, "1-signed-out")

    page.get_by_label("API key").fill(tenant_key)
    page.get_by_role("button", name="Open", exact=True).click()
    _create_from_the_form(page)
    shoot(page, artifacts, "2-new-session")
    page.get_by_label("Message").fill("check things")
    page.get_by_role("button", name="Send").click()
    first = page.locator(".turn").first
    card = page.get_by_role("article", name="Proposed: restart on demo")
    expect(card.get_by_role("button", name="Confirm")).to_be_visible()
    expect(first).to_have_attribute("data-status", "done")
    _open_a_tool_row(page, first, artifacts)
    card.get_by_role("button", name="Confirm").click()
    expect(card).to_contain_text(re.compile(r"Status: (confirmed|execut)"))

    _reload_mid_answer(page, artifacts)
    first = page.locator(".turn").first
    _card_in_place(first)
    expect(card.get_by_role("button", name="Confirm")).to_have_count(0)
    for turn in (first, page.locator(".turn").nth(1)):
        expect(turn.locator(".turn-meta .status")).to_have_text(DONE_LINE)
    shoot(page, artifacts, "5-after-reload")
    turn_id = first.get_attribute("data-turn-id")
    assert turn_id
    with api.as_tenant(tenant_key) as client:
        _inspect(page, client, turn_id, artifacts)

    page.get_by_role("button", name=re.compile("^Colour theme")).click()  # auto → light
    page.get_by_role("button", name=re.compile("^Colour theme")).click()  # light → dark
    expect(page.get_by_role("button", name="Colour theme: dark")).to_be_visible()
    assert page.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(13, 17, 23)"
    shoot(page, artifacts, "7-dark")
    page.set_viewport_size({"width": 375, "height": 800})
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    shoot(page, artifacts, "8-375px")
    assert tab.problems == []
