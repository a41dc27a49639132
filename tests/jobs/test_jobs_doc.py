"""The example of docs/jobs.md runs against the real stack and prints what the page says."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from support import Api

PAGE = Path(__file__).resolve().parents[2] / "docs" / "jobs.md"


def example_of(page: str) -> str:
    """The first Python block after the page's `## Example` heading."""
    after = page.split("\n## Example\n", 1)[1]
    return after.split("```python\n", 1)[1].split("\n```", 1)[0]


def test_the_jobs_page_example_runs(api: Api, tenant_key: str) -> None:
    page = PAGE.read_text()
    env = {**os.environ, "CORTEX_URL": api.base_url, "CORTEX_API_KEY": tenant_key}
    run = subprocess.run(
        [sys.executable, "-c", example_of(page)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    printed = run.stdout.splitlines()
    assert printed == ["succeeded {'sentiment': 'positive'} [False, True]", "5 [0, 1, 2, 3, 4]"]
    assert f"It prints `{printed[0]}`, then `{printed[1]}`." in page
