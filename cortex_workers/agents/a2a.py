"""Calling a remote A2A agent (kind `a2a`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..vocabulary import TaskStatus
from .cards import A2aCard
from .python import Outcome


def run_remote(
    card: A2aCard, task: Any, timeout_s: float, *, still_ours: Callable[[], bool]
) -> Outcome | None:
    """Send the task's input to the remote agent and wait for its answer (polled)."""
    message = "calling A2A agents is not available in this build"
    return Outcome(TaskStatus.FAILED, error={"code": "agent_error", "message": message})
