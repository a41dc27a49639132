"""What the API answers, as typed values. Each model keeps fields it does not name (a newer
server's), so reading never fails on an addition."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, with_config
from typing_extensions import TypedDict

from ..vocabulary import BatchStatus, DeliveryStatus, JobStatus, ProposalStatus, TurnStatus
from .errors import ErrorDoc
from .events import JsonObject as JsonObject
from .events import Usage

IfBusy = Literal["enqueue", "reject", "interrupt"]
UsageGroup = Literal["day", "model", "user", "session"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class ActiveTurn(_Model):
    id: str
    seq: int
    status: TurnStatus


class Session(_Model):
    id: str
    name: str | None = None
    system_prompt: str | None = None
    provider: str
    model: str
    tools: list[str] | None = None
    metadata: JsonObject = {}
    summary: str = ""
    active_turn: ActiveTurn | None = None
    queued_turns: int = 0
    usage: Usage = Usage()
    cost_usd: float = 0.0
    created_at: datetime | None = None
    last_activity_at: datetime | None = None
    """The newest turn's latest time (posted, started or ended), else `created_at`."""


@with_config(ConfigDict(extra="allow"))  # a newer server's fields are kept
class MessageToolCall(TypedDict):
    """A tool call of an assistant message."""

    id: str
    name: str
    arguments: JsonObject


class StoredMessage(_Model):
    seq: int
    role: str
    content: str
    tool_calls: list[MessageToolCall] | None = None
    tool_call_id: str | None = None
    name: str | None = None
    is_error: bool = False
    turn_id: str | None = None
    created_at: datetime | None = None


class MessagesPage(_Model):
    messages: list[StoredMessage]
    next_after: int | None = None


class TurnAccepted(_Model):
    id: str
    session_id: str
    seq: int
    status: TurnStatus
    events_url: str


@with_config(ConfigDict(extra="allow"))  # a newer server's fields are kept
class TurnWarning(TypedDict):
    """Something the turn recorded, e.g. tools offered through the prompt."""

    code: str
    message: str
    step: int


@with_config(ConfigDict(extra="allow"))  # a newer server's fields are kept
class TurnStep(TypedDict, total=False):
    """One step of a turn, as `GET /v1/turns/{id}` shows it."""

    id: str
    step_no: int
    kind: str
    status: str
    attempt: int
    parent_step_id: str | None
    provider: str | None
    model: str | None
    fallback_from: str | None
    usage: dict[str, int]
    cost_usd: float
    latency_ms: int | None
    error: ErrorDoc | None
    route: JsonObject | None
    """The router's decision."""
    redactions: dict[str, int] | None


@with_config(ConfigDict(extra="allow"))  # a newer server's fields are kept
class TurnToolCall(TypedDict, total=False):
    """One tool call of a turn, with its result."""

    id: str
    name: str
    arguments: JsonObject
    status: str
    is_error: bool
    truncated: bool
    severity: str
    error: str | None
    result: str | None
    latency_ms: int | None


class Turn(_Model):
    id: str
    session_id: str
    seq: int
    status: TurnStatus
    content: str
    answer: str | None = None
    error: ErrorDoc | None = None
    warnings: list[TurnWarning] = []
    usage: Usage = Usage()
    cost_usd: float = 0.0
    steps: list[TurnStep] = []
    tool_calls: list[TurnToolCall] = []
    created_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    trace_id: str | None = None


class Proposal(_Model):
    id: str
    session_id: str
    turn_id: str
    action: str
    product: str
    params: JsonObject = {}
    rationale: str = ""
    status: ProposalStatus
    expires_at: datetime | None = None
    outcome: JsonObject | None = None


class Answer(_Model):
    """What `ask` returns: the answer's text as streamed, the stored turn, its usage and cost."""

    text: str
    turn: Turn
    usage: Usage
    cost: float
    """US dollars."""


class JobAccepted(_Model):
    id: str
    status: JobStatus


class JobAttempt(_Model):
    """One model call of a job: its output, and why it was refused (null if valid)."""

    n: int
    output: Any = None
    error: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    provider: str | None = None
    model: str | None = None
    checked: bool = True
    """False while the answer is recorded but not yet validated."""


class Job(_Model):
    id: str
    status: JobStatus
    result: Any = None
    error: ErrorDoc | None = None
    attempts: list[JobAttempt] = []
    usage: Usage = Usage()
    cost_usd: float = 0.0
    batch_id: str | None = None
    batch_index: int | None = None


class BatchAccepted(_Model):
    id: str
    count: int


class Batch(_Model):
    id: str
    status: BatchStatus
    count: int
    counts: dict[str, int] = {}
    """How many jobs are in each status."""
    progress: float = 0.0
    """The share of jobs that ended, 0 to 1."""


class BatchResult(_Model):
    index: int
    job_id: str
    status: JobStatus
    result: Any = None
    error: ErrorDoc | None = None


class BatchResultsPage(_Model):
    results: list[BatchResult]
    next_offset: int | None = None


class Webhook(_Model):
    id: str
    url: str
    events: list[str]
    """`turn.completed`, `job.completed`, … (docs/webhooks.md)."""
    created_at: datetime | None = None
    secret: str | None = None
    """Shown once, when the webhook is created (`whsec_…`)."""


class DeliveryAttempt(_Model):
    attempt: int
    status_code: int | None = None
    error: str | None = None
    duration_ms: int = 0
    next_retry_at: datetime | None = None
    """When the next attempt is due; null after the last one."""


class WebhookDelivery(_Model):
    """One event's delivery to the webhook, with each attempt."""

    id: str
    event_id: str
    """The `webhook-id` every attempt carried."""
    event_type: str
    status: DeliveryStatus
    next_attempt_at: datetime | None = None
    attempts: list[DeliveryAttempt] = []


WebhookList = list[Webhook]
DeliveryList = list[WebhookDelivery]


def items_of(body: Any, key: str) -> list[Any]:
    """The items of a list answer: the body itself, or its `key` (or `data`) field."""
    if isinstance(body, dict):
        body = body.get(key, body.get("data"))
    return list(body) if isinstance(body, list) else []


class Budget(_Model):
    """The caller's tenant's budget: limits, spent, reserved, remaining, `resets_at`,
    `alerted_at` (the fields as the server sends them)."""


class UsageReport(_Model):
    """Calls, input and output tokens and cost, grouped as asked."""
