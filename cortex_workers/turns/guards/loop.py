"""Guarding the tool loop: a call repeated `repeat_limit` times is not run again, a tool past
its `tool_call_limit` is refused and no longer offered, and at most `max_parallel_tools` calls
of one model step run at once (the others wait). See docs/checkpoints.md."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ...messages import JsonObject, Message
from ...recovery_settings import RecoverySettings
from ...runtime import Runtime
from ...store.step_views import ToolStepView
from ...tools import ToolOutcome
from ...vocabulary import AnomalyKind, ToolSeverity
from ..context import ModelContext

WAIT_S = 0.25
"""How long a call past `max_parallel_tools` waits before it looks again."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the guards say of one call: run it, wait, or answer it with `refused`."""

    wait: bool = False
    refused: ToolOutcome | None = None
    anomaly: AnomalyKind | None = None
    data: JsonObject | None = None
    """The anomaly's facts, as the timeline records them."""


def session_limits(metadata: JsonObject | None) -> dict[str, int]:
    """A session's own `tool_call_limits` (`metadata.tool_call_limits`, per tool name)."""
    limits = (metadata or {}).get("tool_call_limits")
    if not isinstance(limits, dict):
        return {}
    return {str(k): v for k, v in limits.items() if isinstance(v, int) and v >= 0}


def _refused(text: str) -> ToolOutcome:
    return ToolOutcome(
        content=text,
        is_error=True,
        truncated=False,
        latency_ms=0,
        severity=ToolSeverity.ERROR,
        error="blocked",
    )


def judge(rt: Runtime, seen: ToolStepView) -> Verdict:
    """The guards' verdict on a tool call, from what came before it in the turn (read with
    the step's claim)."""
    cfg = rt.settings.recovery
    name, arguments = seen.name, seen.arguments
    if cfg.max_parallel_tools is not None and seen.open_siblings >= cfg.max_parallel_tools:
        return Verdict(wait=True)
    if seen.same_arguments >= cfg.repeat_limit:
        text = (
            f"Not run: you already called {name} with these same arguments "
            f"{seen.same_arguments} times in this turn; you are repeating yourself. Use the "
            "results you have, or try something different."
        )
        data: JsonObject = {"tool": name, "arguments": arguments, "calls": seen.same_arguments + 1}
        return Verdict(refused=_refused(text), anomaly=AnomalyKind.REPEATED_TOOL_CALL, data=data)
    limit = cfg.limit_of(name, session_limits(seen.session_metadata))
    if limit is not None and seen.same_tool >= limit:
        text = (
            f"Not run: {name} may be called at most {limit} times in one turn, and it was. "
            "It is no longer offered for the rest of this turn; answer with what you have."
        )
        return Verdict(refused=_refused(text))
    return Verdict()


def offered(
    rt: Runtime,
    ctx: ModelContext,
    *,
    metadata: JsonObject | None,
    counts: dict[str, int] | None,
) -> ModelContext:
    """The context without the tools that reached their limit in this turn, and a note to the
    model saying why they are gone (`counts`: the turn's calls per tool, read with the claim
    when a limit may apply)."""
    cfg: RecoverySettings = rt.settings.recovery
    if not ctx.tools or counts is None:
        return ctx
    own = session_limits(metadata)
    used = counts
    spent = {
        t.name: limit
        for t in ctx.tools
        if (limit := cfg.limit_of(t.name, own)) is not None and used.get(t.name, 0) >= limit
    }
    if not spent:
        return ctx
    note = "; ".join(
        f"{name} (its limit of {n} calls per turn is reached)" for name, n in spent.items()
    )
    message = Message(
        role="system", content=f"These tools are no longer offered in this turn: {note}."
    )
    lead = next((i for i, m in enumerate(ctx.messages) if m.role != "system"), len(ctx.messages))
    messages = (*ctx.messages[:lead], message, *ctx.messages[lead:])
    return replace(ctx, tools=tuple(t for t in ctx.tools if t.name not in spent), messages=messages)
