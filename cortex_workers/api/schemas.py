"""Request and response bodies of the v1 API."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from ..messages import ErrorDoc, JsonObject
from ..providers.scripted import ScriptReply
from ..routing import RouteSpec
from ..store.models import TurnTrigger
from ..store.replies import ToolCallDoc, WarningDoc
from ..turns.sessions import SessionSpec
from ..turns.submit import IfBusy
from ..vocabulary import (
    LlmMode,
    ProposalStatus,
    StepKind,
    StepStatus,
    ToolCallStatus,
    ToolSeverity,
    TurnStatus,
)
from .checkpoint_schemas import ForkedFrom
from .turn_content import MAX_TEXT as MAX_TEXT  # the longest text of a field, for every body
from .turn_content import Content, ImagePart, TextPart

MAX_DEPTH = 32


def storable(value: Any, *, depth: int = 0, where: str = "body") -> None:
    """Refuse what Postgres cannot store: NUL characters, NaN/Infinity, absurd nesting."""
    if depth > MAX_DEPTH:
        raise ValueError(f"{where} is nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, str):
        if "\x00" in value:
            raise ValueError(f"{where} contains a NUL character")
    elif isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"{where} contains a non-finite number")
    elif isinstance(value, dict):
        for k, v in value.items():
            storable(k, depth=depth + 1, where=where)
            storable(v, depth=depth + 1, where=f"{where}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            storable(v, depth=depth + 1, where=f"{where}[{i}]")


class StorableBody(BaseModel):
    """A request body whose every value can be stored as text/JSONB."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _storable(cls, data: Any) -> Any:
        storable(data)
        return data


class Usage(BaseModel):
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


class SessionCreate(StorableBody):
    """A new conversation. Omitted fields take the configured defaults."""

    name: str | None = Field(default=None, max_length=200)
    system_prompt: str | None = Field(default=None, max_length=MAX_TEXT)
    provider: str | None = Field(default=None, min_length=1, max_length=100)
    model: str | None = Field(default=None, min_length=1, max_length=200)
    tools: list[str] | None = Field(
        default=None,
        max_length=128,
        description="Tool names the model may call; omitted means every registered tool.",
    )
    metadata: JsonObject = Field(
        default_factory=dict,
        description="Free-form; `metadata.script` drives the scripted provider.",
    )
    user: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="The end user's id in your system: per-user limits and usage use it.",
    )
    mode: LlmMode | None = Field(
        default=None,
        description="`normal`, `frugal` or `local-only`; only a stricter mode than the "
        "configuration's or the tenant's takes effect.",
    )
    route: RouteSpec | None = Field(
        default=None,
        description='Let the router choose the model (also `model: "auto"`): tier, '
        "max_cost_usd, latency_sla_ms, capabilities.",
    )
    agents: list[str] | None = Field(
        default=None,
        max_length=64,
        description="Agents the model may call, each as the tool `<name>_agent` (GET /v1/agents).",
    )
    whiteboard: bool = Field(
        default=False,
        description="A coordinator session: it gets a shared whiteboard and the tools "
        "update_mission, update_progress, manage_blocker, log_decision, get_team_status.",
    )

    @field_validator("metadata")
    @classmethod
    def _script_is_valid(cls, value: JsonObject) -> JsonObject:
        script = value.get("script")
        if script is not None:
            if not isinstance(script, list):
                raise ValueError("metadata.script must be a list of replies")
            for i, reply in enumerate(script):
                try:
                    ScriptReply.model_validate(reply)
                except ValidationError as exc:
                    first = exc.errors()[0]
                    where = ".".join(str(p) for p in first["loc"])
                    raise ValueError(
                        f"metadata.script[{i}]{'.' + where if where else ''}: {first['msg']}"
                    ) from None
        return value

    def spec(self) -> SessionSpec:
        """What the session asks for, as the domain takes it."""
        return SessionSpec(
            name=self.name,
            system_prompt=self.system_prompt,
            provider=self.provider,
            model=self.model,
            tools=self.tools,
            metadata=self.metadata,
            user=self.user,
            mode=self.mode,
            route=self.route,
            whiteboard=self.whiteboard,
            agents=self.agents,
        )


LAST_ACTIVITY = (
    "When the session's newest turn was posted, started or ended (its latest); the creation time"
    " when it has none."
)


class SessionItem(BaseModel):
    id: uuid.UUID
    name: str | None
    created_at: datetime
    last_activity_at: datetime = Field(description=LAST_ACTIVITY)


class SessionList(BaseModel):
    sessions: list[SessionItem]
    next_before: uuid.UUID | None = Field(description="Pass as `before` for the next page.")


class ActiveTurn(BaseModel):
    id: uuid.UUID
    seq: int
    status: TurnStatus


class SessionOut(BaseModel):
    id: uuid.UUID
    name: str | None
    system_prompt: str | None
    provider: str
    model: str
    tools: list[str] | None
    metadata: JsonObject
    user: str | None = None
    mode: LlmMode | None = None
    route: JsonObject | None = None
    agents: list[str] = Field(
        default_factory=list, description="Agents offered as `<name>_agent` tools."
    )
    parent_session_id: uuid.UUID | None = Field(
        default=None, description="For a sub-agent's (child) session: the calling session."
    )
    whiteboard: bool = Field(description="Created with `whiteboard: true`: a coordinator.")
    summary: str
    summary_upto_seq: int
    active_turn: ActiveTurn | None
    queued_turns: int
    usage: Usage
    cost_usd: float
    created_at: datetime
    last_activity_at: datetime = Field(description=LAST_ACTIVITY)
    forked_from: ForkedFrom | None = None


class TurnCreate(StorableBody):
    """One user message; `if_busy` says what to do when the session is running another turn."""

    content: Content = Field(description="The message's text, or its parts: text and images.")
    if_busy: IfBusy = "enqueue"
    user: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="This turn's end user, when not the session's.",
    )
    model: Literal["auto"] | None = Field(
        default=None, description='`"auto"`: the router chooses this turn\'s model.'
    )
    route: RouteSpec | None = Field(
        default=None, description="This turn's route request (else the session's)."
    )
    dry_run: bool = Field(
        default=False,
        description="Answer 200 with the route, the estimate, whether it fits the budget and "
        "what would be redacted; nothing is stored, reserved or sent.",
    )

    def route_request(self) -> JsonObject | None:
        """The turn's route request as stored (`model: "auto"` alone: tier `auto`)."""
        if self.route is not None:
            return self.route.model_dump(mode="json")
        return RouteSpec().model_dump(mode="json") if self.model == "auto" else None

    @property
    def text(self) -> str:
        """The message's text (its text parts joined by newlines)."""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(p.text for p in self.content if isinstance(p, TextPart))

    @property
    def image_urls(self) -> list[str]:
        if isinstance(self.content, str):
            return []
        return [p.url for p in self.content if isinstance(p, ImagePart)]


class TurnAccepted(BaseModel):
    id: uuid.UUID
    session_id: uuid.UUID
    seq: int
    status: TurnStatus
    events_url: str


class StepOut(BaseModel):
    id: uuid.UUID
    step_no: int
    kind: StepKind
    status: StepStatus
    attempt: int
    parent_step_id: uuid.UUID | None
    provider: str | None
    model: str | None
    fallback_from: str | None = Field(
        description="provider:model this step stood in for, when a fallback served it"
    )
    usage: Usage
    cost_usd: float
    latency_ms: int | None
    error: ErrorDoc | None
    route: JsonObject | None = Field(
        default=None,
        description="The router's decision: provider, model, tier, reason, rejected "
        "candidates with why, fallbacks (and a frugal escalation).",
    )
    redactions: dict[str, int] | None = Field(
        default=None, description="Values replaced before the call, counted per kind."
    )


class ToolCallOut(BaseModel):
    id: str
    name: str
    arguments: JsonObject
    status: ToolCallStatus
    is_error: bool
    truncated: bool
    severity: ToolSeverity
    error: str | None
    result: str | None
    latency_ms: int | None


class TurnOut(BaseModel):
    id: uuid.UUID
    session_id: uuid.UUID
    seq: int
    status: TurnStatus
    content: str
    answer: str | None
    error: ErrorDoc | None
    warnings: list[WarningDoc]
    usage: Usage
    cost_usd: float
    steps: list[StepOut]
    tool_calls: list[ToolCallOut]
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    events_url: str
    trigger: TurnTrigger | None = Field(
        default=None,
        description='What started a turn no user posted: `{"kind": "task", "task_id"}` for '
        "the follow-up of a background agent task; null for a user's turn.",
    )
    trace_id: str | None = Field(
        description="The turn's trace (32 hex digits) in the tracing backend: every step of the "
        "turn is a span in it. Null when tracing was off as the turn was submitted."
    )


class MessageOut(BaseModel):
    seq: int
    role: str
    content: str
    tool_calls: list[ToolCallDoc] | None
    tool_call_id: str | None
    name: str | None
    is_error: bool
    turn_id: uuid.UUID | None
    created_at: datetime
    rolled_back: bool = False
    images: list[str] | None = None
    """A user message's images (their URLs), or those a tool result passed on, when it has any."""


class MessagesPage(BaseModel):
    messages: list[MessageOut]
    next_after: int | None = Field(
        description="Pass as `after` for the next page; null at the end."
    )


class ProposalOut(BaseModel):
    id: uuid.UUID
    session_id: uuid.UUID
    turn_id: uuid.UUID
    action: str
    product: str
    params: JsonObject
    rationale: str
    blast_radius: str | None
    reversible: bool | None
    status: ProposalStatus
    created_at: datetime
    expires_at: datetime
    decided_at: datetime | None
    executed_at: datetime | None
    outcome: JsonObject | None


class ErrorOut(BaseModel):
    error: ErrorDoc
