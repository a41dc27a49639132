"""The example of docs/webhooks.md runs against the real stack and prints what the page says."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from support import Api

ROOT = Path(__file__).resolve().parents[2]


def test_the_webhooks_page_example_runs(api: Api, tenant_key: str) -> None:
    page = (ROOT / "docs" / "webhooks.md").read_text()
    assert '--8<-- "docs/examples/webhook_receiver.py"' in page
    env = {**os.environ, "CORTEX_URL": api.base_url, "CORTEX_API_KEY": tenant_key}
    run = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "examples" / "webhook_receiver.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [
        "job.completed True succeeded",
        "job.completed succeeded [204]",
    ]
    assert "It prints `job.completed True succeeded`" in page
