"""Typed values, no ids from storage: conversation messages, the events a provider streams and
their fold into one `Completion`, and the events of a turn's stream with their one encoding.

It is long because the whole stream contract (every event type, the unions and the one
encoder, docs/events.md) is kept in one place, where `assert_never` checks it is complete."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Literal, NotRequired, TypeAlias, assert_never

from pydantic import ConfigDict, JsonValue, with_config
from typing_extensions import TypedDict

from .vocabulary import AgentMode, ProposalStatus, TaskStatus, ToolSeverity, TurnStatus

Role = Literal["system", "user", "assistant", "tool"]
FinishReason = Literal["stop", "tool_calls", "length", "cancelled"]
PREVIOUS_SUMMARY = "Previous summary:\n"
"""Prefix of the system message that carries the rolling summary into a summarize request."""
JsonObject: TypeAlias = dict[str, JsonValue]
"""A JSON object whose shape is open by contract: a JSON Schema, the arguments a model gives a
tool, a tenant's metadata, a payload passed through to or from a provider."""


@with_config(ConfigDict(extra="allow"))  # the API shows a stored document whole
class ErrorDoc(TypedDict):
    """Why something failed, wherever an error is carried: a turn's, a step's, a job's or a
    task's `error` column, the `error` event, an API error body and the client's copy of it."""

    code: str
    """Stable, for programs."""
    message: str
    """For people: says what to do next."""
    details: NotRequired[JsonValue]
    """What else the caller may act on (the invalid fields of a request, a provider's
    answer), where there is something."""


@with_config(ConfigDict(extra="allow"))  # the API shows a stored document whole
class AttemptErrorDoc(ErrorDoc):
    """The error of a model step's attempt that is retried, as the step keeps it."""

    attempt: int
    provider: str
    model: str


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A call the model asked for; `id` is the provider's call id."""

    id: str
    name: str
    arguments: JsonObject


@dataclass(frozen=True, slots=True)
class Message:
    """One message of the context the model sees."""

    role: Role
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    """For `tool` messages: the call this is the result of."""
    name: str | None = None
    """For `tool` messages: the tool's name."""
    is_error: bool = False
    images: tuple[str, ...] = ()
    """A user message's images: `https:` or `data:image/…;base64,` URLs."""


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as offered to the model."""

    name: str
    description: str
    parameters: JsonObject
    """Its arguments' JSON Schema."""


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """What a provider needs to answer one model step."""

    model: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    purpose: Literal["reply", "summarize"] = "reply"
    temperature: float | None = None
    max_tokens: int | None = None
    script: tuple[JsonValue, ...] | None = None
    """The session's `metadata.script` (scripted provider only), which it validates."""
    call_index: int = 0
    """Which model step of the session this is, from 0 (scripted provider)."""
    attempt: int = 1
    """Which attempt of this step this is, from 1."""
    result_schema: JsonObject | None = None
    """A JSON Schema the answer must follow (a job's `result_schema`): providers with
    structured output get it natively (OpenAI `response_format`, Anthropic forced tool use)."""


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str
    kind: Literal["text"] = "text"


@dataclass(frozen=True, slots=True)
class ToolCallEvent:
    call: ToolCall
    kind: Literal["tool_call"] = "tool_call"


@dataclass(frozen=True, slots=True)
class UsageEvent:
    """Token counts of the whole call; a provider may report it more than once (last wins)."""

    input_tokens: int
    output_tokens: int
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    kind: Literal["usage"] = "usage"


@dataclass(frozen=True, slots=True)
class WarningEvent:
    """Something the turn should record (e.g. tools offered through the prompt)."""

    code: str
    message: str
    kind: Literal["warning"] = "warning"


@dataclass(frozen=True, slots=True)
class FinishEvent:
    reason: FinishReason = "stop"
    kind: Literal["finish"] = "finish"


StreamEvent = TextDelta | ToolCallEvent | UsageEvent | WarningEvent | FinishEvent


@dataclass(slots=True)
class Completion:
    """A whole answer, collected from a stream."""

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    finish_reason: str = "stop"
    warnings: list[WarningEvent] = field(default_factory=list)


@dataclass(slots=True)
class CompletionBuilder:
    """Folds a provider's stream into its `Completion`, one event at a time: the one fold used
    by a streamed model step and by the non-streaming call alike."""

    completion: Completion = field(default_factory=Completion)

    def add(self, event: StreamEvent) -> None:
        out = self.completion
        match event:
            case TextDelta(text=text):
                out.text += text
            case ToolCallEvent(call=call):
                out.tool_calls.append(call)
            case UsageEvent():  # reported more than once: the last one wins
                out.input_tokens, out.output_tokens = event.input_tokens, event.output_tokens
                out.cache_read_tokens = event.cache_read_tokens
                out.cache_write_tokens = event.cache_write_tokens
            case WarningEvent():
                out.warnings.append(event)
            case FinishEvent(reason=reason):
                out.finish_reason = reason
            case _:
                assert_never(event)


# The events of a turn's stream, as SSE sends them (docs/events.md). Each value names its SSE
# event in `event`; `encode` turns it into the entry's event name and JSON data.


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamOpened:
    """The stream's start marker, written with its first entry and never sent to clients."""

    event: Literal["open"] = "open"


@dataclass(frozen=True, slots=True, kw_only=True)
class Token:
    """A piece of a model step's text, as the model streamed it."""

    text: str
    step: int
    event: Literal["token"] = "token"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallRequested:
    """A tool call the model asked for in a model step."""

    id: str
    name: str
    arguments: JsonObject
    step: int
    event: Literal["tool_call"] = "tool_call"

    @classmethod
    def of(cls, call: ToolCall, *, step: int) -> ToolCallRequested:
        return cls(id=call.id, name=call.name, arguments=call.arguments, step=step)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResultReady:
    """A tool call's stored result."""

    id: str
    name: str
    is_error: bool
    content: str
    truncated: bool
    severity: ToolSeverity
    """How a UI colours it: ok, info=gray, warning=yellow, error=red."""
    error: str | None
    """The failure's kind when `is_error`."""
    event: Literal["tool_result"] = "tool_result"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolProgress:
    """A tool call still running after a while."""

    id: str
    name: str
    elapsed_s: float
    message: str
    event: Literal["tool_progress"] = "tool_progress"


@dataclass(frozen=True, slots=True, kw_only=True)
class ProposalChanged:
    """An action awaiting (or past) an operator's decision: in a turn's tool batch when it is
    proposed, on the session's notices when it is decided, expires or is executed."""

    id: str
    action: str
    product: str
    rationale: str
    status: ProposalStatus
    params: JsonObject
    """The action's parameters, as the model gave them."""
    blast_radius: str | None
    reversible: bool | None
    expires_at: str | None
    """ISO 8601."""
    event: Literal["proposal"] = "proposal"


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentStarted:
    """An agent call (`<name>_agent`) started a task: in the calling turn's tool batch."""

    id: str
    """The model's tool call id."""
    name: str
    agent: str
    task_id: str
    mode: AgentMode
    event: Literal["agent_started"] = "agent_started"


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentDone:
    """A foreground agent call ended; its answer follows as the call's `tool_result`."""

    id: str
    name: str
    agent: str
    task_id: str
    status: TaskStatus
    event: Literal["agent_done"] = "agent_done"


@with_config(ConfigDict(extra="allow"))  # the API shows a stored document whole
class TaskProgress(TypedDict, total=False):
    """An agent task's last progress report."""

    fraction: float
    """From 0 to 1."""
    note: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskChanged:
    """An agent task changed state or reported progress: on the session's notices."""

    id: str
    agent: str
    status: TaskStatus
    progress: TaskProgress | None
    """As the agent last reported it."""
    error: ErrorDoc | None
    follow_up_turn_id: str | None
    event: Literal["task"] = "task"


@dataclass(frozen=True, slots=True, kw_only=True)
class StepRestart:
    """Drop the partial text a client holds of this model step: a new attempt starts it over,
    or the turn ended while it streamed."""

    step: int
    attempt: int
    event: Literal["step_restart"] = "step_restart"


@dataclass(frozen=True, slots=True, kw_only=True)
class AssistantMessage:
    """The stored assistant message of a model step."""

    role: Literal["assistant"] = "assistant"
    content: str
    step: int
    event: Literal["message"] = "message"


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnError:
    """Why a turn failed."""

    code: str
    message: str
    event: Literal["error"] = "error"


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnDone:
    """The turn's last event: its terminal status and totals."""

    status: TurnStatus
    """A terminal one."""
    usage: Usage
    cost_usd: float
    event: Literal["done"] = "done"


TurnEvent = (
    StreamOpened
    | Token
    | ToolCallRequested
    | ToolResultReady
    | ToolProgress
    | ProposalChanged
    | AgentStarted
    | AgentDone
    | TaskChanged
    | StepRestart
    | AssistantMessage
    | TurnError
    | TurnDone
)
"""Every event a turn's stream (or a session's notices) carries."""
BatchEvent = ToolResultReady | ToolProgress | ProposalChanged | AgentStarted | AgentDone
"""The events of a tool batch, written between its model step and the next."""
SessionNotice = ProposalChanged | TaskChanged
"""The events of a session that belong to no turn."""


def event_data(event: TurnEvent) -> dict[str, object]:
    """The event's data, with the field names and order of the wire contract."""
    match event:
        case StreamOpened():
            return {}
        case Token(text=text, step=step):
            return {"text": text, "step": step}
        case ToolCallRequested():
            return {
                "id": event.id,
                "name": event.name,
                "arguments": event.arguments,
                "step": event.step,
            }
        case ToolResultReady():
            return {
                "id": event.id,
                "name": event.name,
                "is_error": event.is_error,
                "content": event.content,
                "truncated": event.truncated,
                "severity": event.severity,
                "error": event.error,
            }
        case ToolProgress():
            return {
                "id": event.id,
                "name": event.name,
                "elapsed_s": event.elapsed_s,
                "message": event.message,
            }
        case ProposalChanged():
            return {
                "id": event.id,
                "action": event.action,
                "product": event.product,
                "rationale": event.rationale,
                "status": event.status,
                "params": event.params,
                "blast_radius": event.blast_radius,
                "reversible": event.reversible,
                "expires_at": event.expires_at,
            }
        case AgentStarted() | AgentDone() | TaskChanged():  # the fields, in declared order
            return {f.name: getattr(event, f.name) for f in fields(event) if f.name != "event"}
        case StepRestart(step=step, attempt=attempt):
            return {"step": step, "attempt": attempt}
        case AssistantMessage():
            return {"role": event.role, "content": event.content, "step": event.step}
        case TurnError(code=code, message=message):
            return {"code": code, "message": message}
        case TurnDone(usage=usage):
            return {
                "status": event.status,
                "usage": {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens},
                "cost_usd": event.cost_usd,
            }
        case _:
            assert_never(event)


def encode(event: TurnEvent) -> tuple[str, str]:
    """The one encoding of an event, for the live stream and the snapshot alike: its SSE
    event name and its data as JSON."""
    return event.event, json.dumps(event_data(event), ensure_ascii=False, default=str)
