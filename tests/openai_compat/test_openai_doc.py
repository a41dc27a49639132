"""The example of docs/openai-compatibility.md runs against the real stack and prints what the
page says."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from doc_examples import DOCS, run_example
from support import Api

pytestmark = pytest.mark.servers  # on both CI passes: the API is checked on either server set


def test_the_openai_compatibility_page_example_runs(api: Api, tenant_key: str) -> None:
    page, printed = run_example("openai-compatibility.md", api, tenant_key)
    assert printed == ["completed Hello from cortex-workers.", "response.completed You said hello."]
    assert f"It prints `{printed[0]}`, then `{printed[1]}`." in page


def test_the_function_tools_example_runs(api: Api, tenant_key: str) -> None:
    page = (DOCS / "openai-compatibility.md").read_text()
    section = page.split("\n## Function tools\n", 1)[1]
    code = section.split("```python\n", 1)[1].split("\n```", 1)[0]
    env = {**os.environ, "CW": api.base_url, "CW_KEY": tenant_key}
    run = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr
    printed = run.stdout.splitlines()
    assert printed == ['get_weather {"city": "Paris"}', "It is sunny in Paris."]
    assert f"It prints `{printed[0]}`, then `{printed[1]}`" in section
