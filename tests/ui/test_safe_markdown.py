"""Model output is shown as a small subset of Markdown and never as HTML: a reply carrying
`<img onerror>`, `<script>` and a `javascript:` link shows them as text, from the stored history
and live from the stream alike."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import Browser, Locator, Page, expect
from support import Api
from ui.page_support import new_tab, shoot

HOSTILE = (
    "Here is **bold**, *emphasis*, `code` and [a link](https://example.org/).\n\n"
    "<img src=x onerror=\"document.body.dataset.pwned='img'\">\n"
    "<script>document.body.dataset.pwned='script'</script>\n"
    "[click me](javascript:document.body.dataset.pwned='link')\n\n"
    "```\n<b>not bold</b>\n```"
)


def _shown_as_text(page: Page, answer: Locator) -> None:
    expect(answer.locator("strong")).to_have_text("bold")
    expect(answer.locator("em")).to_have_text("emphasis")
    expect(answer.get_by_role("link", name="a link")).to_have_attribute(
        "href", "https://example.org/"
    )
    expect(answer).to_contain_text("<img src=x onerror=\"document.body.dataset.pwned='img'\">")
    expect(answer).to_contain_text("<script>document.body.dataset.pwned='script'</script>")
    expect(answer.locator("pre")).to_have_text("<b>not bold</b>")
    expect(answer.get_by_role("link", name="click me")).to_have_count(0)
    for tag in ("img", "script", "b", "iframe"):
        expect(answer.locator(tag)).to_have_count(0)
    assert page.evaluate("document.body.dataset.pwned") is None


def test_model_output_is_never_html(browser: Browser, client: Api, artifacts: Path) -> None:
    sid = client.scripted_session({"text": HOSTILE}, {"text": HOSTILE, "token_ms": 5}, name="md")
    assert client.wait_turn(client.submit(sid, "first"))["status"] == "done"
    r = client.http.post(f"/v1/sessions/{sid}/tokens", json={"scope": "chat", "ttl_s": 600})
    tab = new_tab(browser)
    page = tab.page
    page.goto(f"{client.base_url}/ui/#session={sid}&token={r.json()['token']}")
    history = page.locator(".turn").first.locator(".assistant")
    _shown_as_text(page, history)  # from the stored history

    page.get_by_label("Message").fill("second")
    page.get_by_role("button", name="Send").click()
    live = page.locator(".turn").nth(1)
    expect(live).to_have_attribute("data-status", "done")
    _shown_as_text(page, live.locator(".assistant"))  # streamed token by token
    expect(live.locator(".turn-meta .status")).to_have_text(re.compile(r"^done · "))
    shoot(page, artifacts, "markdown-as-text")
    assert tab.problems == []
