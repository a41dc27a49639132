"""The events of a turn's stream as typed values (docs/events.md), and the rule that turns them
into the answer's text.

Every event has the SSE `id` it came with, its `event` name, and `turn` (set on a session's
stream). An event whose name this client does not know arrives as an `UnknownEvent` with its raw
data, so a newer server never breaks an older client.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, JsonValue, TypeAdapter, ValidationError

from ..vocabulary import ProposalStatus, ToolSeverity, TurnStatus

JsonObject: TypeAlias = dict[str, JsonValue]
"""A JSON object whose shape is open: a tool's arguments, a proposal's params, metadata, a JSON
Schema (the server's `cortex_workers.messages.JsonObject`)."""


class _Event(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)
    id: str = ""
    """The SSE id: send the last one back as `last_event_id` to resume."""
    turn: str | None = None
    """The turn's id, on a session's stream."""


class TokenEvent(_Event):
    """A piece of the answer of model step `step`."""

    event: Literal["token"] = "token"
    text: str
    step: int


class ToolCallEvent(_Event):
    """A tool call the model asked for in model step `step`."""

    event: Literal["tool_call"] = "tool_call"
    call_id: str = Field(alias="id_", default="")
    name: str
    arguments: JsonObject
    step: int


class ToolProgressEvent(_Event):
    """Tool call `call_id` is still running after a while."""

    event: Literal["tool_progress"] = "tool_progress"
    call_id: str = Field(alias="id_", default="")
    name: str
    elapsed_s: float
    message: str


class ProposalEvent(_Event):
    """An action the model proposed (or a later change of its status)."""

    event: Literal["proposal"] = "proposal"
    proposal_id: str = Field(alias="id_", default="")
    action: str
    product: str
    rationale: str
    status: ProposalStatus
    params: JsonObject
    blast_radius: str | None = None
    reversible: bool | None = None
    expires_at: str | None = None


class ToolResultEvent(_Event):
    """A tool call's result; `severity` says how to colour it."""

    event: Literal["tool_result"] = "tool_result"
    call_id: str = Field(alias="id_", default="")
    name: str
    is_error: bool
    content: str
    truncated: bool
    severity: ToolSeverity
    error: str | None = None


class StepRestartEvent(_Event):
    """Drop the text received so far of model step `step`."""

    event: Literal["step_restart"] = "step_restart"
    step: int
    attempt: int


class MessageEvent(_Event):
    """The stored assistant message of model step `step`."""

    event: Literal["message"] = "message"
    role: str
    content: str
    step: int


class Usage(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)
    input_tokens: int = 0
    output_tokens: int = 0


class ErrorEvent(_Event):
    """Why the turn failed."""

    event: Literal["error"] = "error"
    code: str
    message: str


class DoneEvent(_Event):
    """The turn's last event."""

    event: Literal["done"] = "done"
    status: TurnStatus
    usage: Usage
    cost_usd: float


class UnknownEvent(_Event):
    """An event this client does not know (or could not read): its name and raw data."""

    event: str
    data: Any = None


KnownEvent = Annotated[
    TokenEvent
    | ToolCallEvent
    | ToolProgressEvent
    | ProposalEvent
    | ToolResultEvent
    | StepRestartEvent
    | MessageEvent
    | ErrorEvent
    | DoneEvent,
    Field(discriminator="event"),
]
Event = (
    TokenEvent
    | ToolCallEvent
    | ToolProgressEvent
    | ProposalEvent
    | ToolResultEvent
    | StepRestartEvent
    | MessageEvent
    | ErrorEvent
    | DoneEvent
    | UnknownEvent
)
_KNOWN: TypeAdapter[KnownEvent] = TypeAdapter(KnownEvent)


def parse_event(event: str, data: str, event_id: str = "") -> Event:
    """One SSE event as its typed value; never raises."""
    try:
        payload = json.loads(data) if data else {}
    except ValueError:
        return UnknownEvent(event=event, id=event_id, data=data)
    if not isinstance(payload, dict):
        return UnknownEvent(event=event, id=event_id, data=payload)
    fields = {k: v for k, v in payload.items() if k not in ("event", "id")}
    # the event's own `id` (a call's or a proposal's) is kept apart from the SSE id
    fields.update(event=event, id=event_id)
    if "id" in payload:
        fields["id_"] = payload["id"]
    try:
        return _KNOWN.validate_python(fields)
    except ValidationError:
        return UnknownEvent(event=event, id=event_id, turn=payload.get("turn"), data=payload)


class TextAccumulator:
    """The answer's text as the events so far give it: `token` text per model step, a step's
    text dropped when `step_restart` names it. Equal to the stored answer once `done` came."""

    def __init__(self) -> None:
        self._steps: dict[tuple[str | None, int], str] = {}

    def add(self, event: Event) -> None:
        if isinstance(event, TokenEvent):
            key = (event.turn, event.step)
            self._steps[key] = self._steps.get(key, "") + event.text
        elif isinstance(event, StepRestartEvent):
            self._steps[(event.turn, event.step)] = ""

    @property
    def text(self) -> str:
        return "".join(self._steps[k] for k in self._steps)
