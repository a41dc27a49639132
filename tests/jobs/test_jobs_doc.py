"""The example of docs/jobs.md runs against the real stack and prints what the page says."""

from __future__ import annotations

from doc_examples import run_example
from support import Api


def test_the_jobs_page_example_runs(api: Api, tenant_key: str) -> None:
    page, printed = run_example("jobs.md", api, tenant_key)
    assert printed == ["succeeded {'sentiment': 'positive'} [False, True]", "5 [0, 1, 2, 3, 4]"]
    assert f"It prints `{printed[0]}`, then `{printed[1]}`." in page
