"""Helpers of tests/openai_compat: scripted replies as OpenAI's string metadata."""

from __future__ import annotations

import json
from typing import Any

MODEL = "scripted-1"


def script(*replies: dict[str, Any] | str) -> dict[str, str]:
    """`metadata` whose `script` makes the scripted provider answer `replies` in order."""
    items = [{"text": r} if isinstance(r, str) else r for r in replies]
    return {"script": json.dumps(items)}
