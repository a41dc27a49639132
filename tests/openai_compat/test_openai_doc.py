"""The example of docs/openai-compatibility.md runs against the real stack and prints what the
page says."""

from __future__ import annotations

from doc_examples import run_example
from support import Api


def test_the_openai_compatibility_page_example_runs(api: Api, tenant_key: str) -> None:
    page, printed = run_example("openai-compatibility.md", api, tenant_key)
    assert printed == ["completed Hello from cortex-workers.", "response.completed You said hello."]
    assert f"It prints `{printed[0]}`, then `{printed[1]}`." in page
