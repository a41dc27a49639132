"""The example of docs/webhooks.md runs against the real stack and prints what the page says."""

from __future__ import annotations

from doc_examples import run_example
from support import Api


def test_the_webhooks_page_example_runs(api: Api, tenant_key: str) -> None:
    page, printed = run_example("webhooks.md", api, tenant_key)
    assert printed == ["job.completed True succeeded", "job.completed succeeded [204]"]
    assert f"It prints `{printed[0]}`, then the delivery log: `{printed[1]}`." in page
