"""Run the Python example of a docs page against the real stack (docs/jobs.md, docs/webhooks.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from support import Api

DOCS = Path(__file__).resolve().parent.parent / "docs"


def example_of(page: str) -> str:
    """The first Python block after the page's `## Example` heading."""
    after = page.split("\n## Example\n", 1)[1]
    return after.split("```python\n", 1)[1].split("\n```", 1)[0]


def run_example(name: str, api: Api, tenant_key: str) -> tuple[str, list[str]]:
    """The page's text and the lines its example printed (it must exit 0)."""
    page = (DOCS / name).read_text()
    env = {**os.environ, "CW": api.base_url, "CW_KEY": tenant_key}  # as every page names them
    run = subprocess.run(
        [sys.executable, "-c", example_of(page)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    return page, run.stdout.splitlines()
