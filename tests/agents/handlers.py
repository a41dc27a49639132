"""Python agent handlers of the tests (cards in tests/agents/cards)."""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any


def quick_lookup(input: dict[str, Any], ctx: Any) -> dict[str, Any]:
    return {"answer": f"lookup of {input['task']}", "task_id": ctx.task_id}


def failing(input: dict[str, Any], ctx: Any) -> str:
    raise RuntimeError("the archive is unreachable")


def sleepy(input: dict[str, Any], ctx: Any) -> str:
    ctx.progress(0.0, "sleeping")
    time.sleep(float(input.get("seconds", 30)))
    return "woke up"


async def async_lookup(input: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """An `async def` handler: awaited, its answer stored like a plain one's."""
    await asyncio.sleep(0.05)
    ctx.progress(0.5, "half way")
    return {"answer": f"async lookup of {input['task']}"}


WITNESS_DIR = Path(tempfile.gettempdir()) / "cortex-agent-witness"


def witness(input: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """Writes down the input it received (tests/agents/test_agent_privacy.py reads it), and
    answers with its text."""
    WITNESS_DIR.mkdir(exist_ok=True)
    (WITNESS_DIR / f"{ctx.task_id}.json").write_text(json.dumps(input))
    return {"seen": input["task"]}
