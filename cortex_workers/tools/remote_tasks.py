"""A call that answered with a task running on in the tool's server (an MCP server's task
handle, docs/mcp.md, "Tools that answer with a task"), and what a look at that task finds.

A tool returns `RemoteTask` instead of its result; the router passes it on in the outcome and
the tool step is parked until a poll finds the task ended (`TaskPoll`).
"""

from __future__ import annotations

from dataclasses import dataclass

MIN_POLL_S = 0.2
"""The shortest wait between two looks at a task, whatever its server suggests."""
DEFAULT_POLL_S = 2.0
"""The wait between two looks at a task whose server suggests none."""


def poll_wait(interval_ms: int | None) -> float:
    """Seconds until the next look at a task, from its server's `pollIntervalMs`."""
    if interval_ms is None:
        return DEFAULT_POLL_S
    return max(MIN_POLL_S, interval_ms / 1000)


@dataclass(frozen=True, slots=True)
class RemoteTask:
    """The call's answer: a task of `server`, to look at every `poll_s` for at most `wait_s`."""

    server: str
    task_id: str
    poll_s: float
    wait_s: float
    """How long the call may wait for the task (the server's `task_timeout`, within the
    task's own time to live)."""
    message: str | None = None
    """The server's `statusMessage`, if any."""


@dataclass(frozen=True, slots=True)
class TaskPoll:
    """One look at a task: still working (look again in `poll_s`), or ended with `result`
    (what the tool would have returned) or `failure` (what the model reads as an error)."""

    working: bool
    poll_s: float = DEFAULT_POLL_S
    result: object = None
    failure: str | None = None
