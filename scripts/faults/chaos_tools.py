"""A slow tool for the fault harness, so that SIGKILLs of the `tools` worker land on running
tool calls (the built-in `calculate` and `current_time` finish in a millisecond).

Loaded by the harness's workers through `CORTEX_TOOL_MODULES='["scripts.faults.chaos_tools"]'`
(the repository root is on their PYTHONPATH).
"""

from __future__ import annotations

import time
from typing import Any

from cortex_workers.tools import Tool, ToolRegistry

SECONDS = {
    "type": "object",
    "properties": {"seconds": {"type": "number", "minimum": 0, "maximum": 4}},
    "required": ["seconds"],
    "additionalProperties": False,
}


def chaos_sleep(seconds: float) -> dict[str, Any]:
    time.sleep(seconds)
    return {"slept": seconds}


def register(registry: ToolRegistry) -> None:
    registry.register(
        Tool(
            "chaos_sleep",
            "Sleeps for `seconds` (at most 4) and says so.",
            SECONDS,
            chaos_sleep,
            timeout_s=5,
            max_timeout_s=5,
            source="module",
        )
    )
