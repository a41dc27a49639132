"""What a tool call's result becomes, whichever way it came (at once, or when the task its
server answered with ended): the timeline's `tool` event, the stored result with its audit row,
and the `tool_result` event clients see."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from ..messages import JsonObject, ToolResultReady
from ..store.step_commit import NewProposal, ToolDone
from ..tools import ToolOutcome


@dataclass(frozen=True, slots=True)
class CallResult:
    """One call (its ids, name and arguments) and its outcome; `details` go on the timeline
    event and the audit row (a parked call's task)."""

    tool_call_id: uuid.UUID
    call_id: str
    name: str
    arguments: JsonObject
    outcome: ToolOutcome
    details: dict[str, object] = field(default_factory=dict)

    def timeline_event(self) -> dict[str, object]:
        """The timeline's `tool` event: the call and its result."""
        o = self.outcome
        return {
            "call_id": self.call_id,
            "name": self.name,
            "arguments": self.arguments,
            **self.details,
            "is_error": o.is_error,
            "severity": o.severity,
            "error": o.error,
            "chars": len(o.content),
            "truncated": o.truncated,
            "latency_ms": o.latency_ms,
        }

    def done(self, proposal: NewProposal | None = None) -> ToolDone:
        """The result as the step's closing statement stores it, with its audit row."""
        o = self.outcome
        return ToolDone(
            tool_call_id=self.tool_call_id,
            call_id=self.call_id,
            name=self.name,
            content=o.content,
            is_error=o.is_error,
            truncated=o.truncated,
            severity=o.severity,
            error_kind=o.error,
            latency_ms=o.latency_ms,
            images=o.images,
            audit_input={"arguments": self.arguments},
            audit_output={
                "chars": len(o.content),
                **({"images": len(o.images)} if o.images else {}),
                "truncated": o.truncated,
                "severity": o.severity,
                "error": o.error,
                **self.details,
                **({"proposal_id": str(proposal.id)} if proposal else {}),
                **({"message": o.content[:500]} if o.is_error else {}),
            },
            proposal=proposal,
        )

    def ready(self) -> ToolResultReady:
        """The `tool_result` event."""
        o = self.outcome
        return ToolResultReady(
            id=self.call_id,
            name=self.name,
            is_error=o.is_error,
            content=o.content,
            truncated=o.truncated,
            severity=o.severity,
            error=o.error,
        )
