"""`[recovery]`: the tool loop's guards, the anomaly detectors' thresholds and the action each
anomaly leads to (docs/checkpoints.md), part of `settings.Settings`."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

AnomalyName = Literal[
    "cost_overrun",
    "latency_spike",
    "short_output",
    "context_degradation",
    "repeated_tool_call",
    "depth_exceeded",
]
"""`vocabulary.AnomalyKind`'s values (settings sit below the vocabulary; a test keeps them in
step)."""
ActionName = Literal["continue", "retry", "fallback", "rollback", "escalate"]
"""`vocabulary.RecoveryAction`'s values."""


class Thresholds(BaseModel):
    """`[recovery.thresholds]`: when each detector fires."""

    model_config = ConfigDict(extra="forbid")
    cost_overrun: float = Field(default=2.0, gt=0)
    """A call's actual cost above this many times the step's estimate."""
    latency_spike: float = Field(default=3.0, gt=0)
    """A provider call longer than this many times that model's measured p95."""
    latency_min_ms: float = Field(default=0.0, ge=0)
    """No spike below this many milliseconds (a fast model's p95 is noisy)."""
    short_output: int = Field(default=1, ge=0)
    """A final answer with no tool calls shorter than this many characters (`min_chars`)."""
    context_degradation: float = Field(default=0.2, gt=0, lt=1)
    """A new summary shorter than this fraction of the one it replaced."""


def _default_actions() -> dict[AnomalyName, ActionName]:
    return {kind: "continue" for kind in get_args(AnomalyName)}


class RecoverySettings(BaseModel):
    """`[recovery]`: the loop guards (per turn), then one action per anomaly kind."""

    model_config = ConfigDict(extra="forbid")
    repeat_limit: int = Field(default=3, ge=1)
    """Calls of one tool with the same arguments in a turn; a further one is not run."""
    tool_call_limit: int | None = Field(default=None, ge=1)
    """Calls of any one tool in a turn (None: no limit); past it the tool is not offered."""
    tool_call_limits: dict[str, int] = Field(default_factory=dict)
    """Per tool name, overriding `tool_call_limit`."""
    max_parallel_tools: int | None = Field(default=None, ge=1)
    """Tool calls of one model step that run at once (None: all); the others wait."""
    actions: dict[AnomalyName, ActionName] = Field(default_factory=_default_actions)
    """The action of each anomaly kind (the kinds left out: `continue`)."""
    thresholds: Thresholds = Field(default_factory=Thresholds)

    def limit_of(self, tool: str, session_limits: dict[str, int] | None = None) -> int | None:
        """The calls `tool` may get in one turn: the session's override, else the
        configuration's."""
        if session_limits and tool in session_limits:
            return session_limits[tool]
        return self.tool_call_limits.get(tool, self.tool_call_limit)
