"""Each example of docs/client.md runs against the real stack and prints what the page says."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from support import Api

DOC = Path(__file__).resolve().parents[2] / "docs" / "client.md"
FENCE = re.compile(r"^```(\w+)\n(.*?)^```\n", re.S | re.M)


def _blocks(kind: str) -> list[str]:
    return [body for lang, body in FENCE.findall(DOC.read_text()) if lang == kind]


@pytest.mark.parametrize("n", [0, 1], ids=["turns", "functions"])
def test_the_client_examples_print_what_the_page_says(api: Api, tenant_key: str, n: int) -> None:
    example, printed = _blocks("python")[n], _blocks("text")[n]
    out = subprocess.run(
        [sys.executable, "-c", example],
        env={"CW": api.base_url, "CW_KEY": tenant_key, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == printed


def test_every_page_names_the_server_and_the_key_alike() -> None:
    """`CW` and `CW_KEY`, as `cortex-workers dev` prints them; and where a page runs Python,
    it says which Python (the project's environment has the package and its libraries)."""
    for page in sorted(DOC.parent.glob("*.md")):
        text = page.read_text()
        for other in ("CORTEX_URL", "CORTEX_API_KEY"):
            assert other not in text, f"{page.name} names {other}; every page uses CW / CW_KEY"
        if "os.environ" in text and "```python" in text:
            assert ".venv/bin/python" in text, f"{page.name} does not say which Python runs it"
