"""The `research` agent's handler (card: research.yaml, next to this file).

An `agents` worker calls `run(input, ctx)` with the call's validated arguments; it may take
minutes, reports its progress, and returns the text the follow-up turn reads. `async def run`
works too.
"""

import time
from typing import Any

SOURCES = 5


def run(input: dict[str, Any], ctx: Any) -> str:
    for i in range(SOURCES):
        ctx.progress(i / SOURCES, f"reading source {i + 1} of {SOURCES}")
        time.sleep(1)  # stands for the real work: searching, reading, asking a model
    return f"Research on {input['task']}: {SOURCES} sources read, and they agree."
