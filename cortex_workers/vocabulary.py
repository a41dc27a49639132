"""The closed sets of the turn pipeline: lifecycle states and kinds, spelled once.

Each is a `StrEnum`: a member compares equal to its value, so it is stored, sent over JSON and
rendered into SQL as that value. The database holds the same sets as CHECK constraints
(migration 0004); `tests/test_vocabulary.py` keeps the two in step.
"""

from __future__ import annotations

from enum import StrEnum


class TurnStatus(StrEnum):
    """A turn's lifecycle: `queued` → `running` → one of the three terminal states; a rollback
    later moves an ended turn to `rolled_back` (its messages leave the history)."""

    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"
    ROLLED_BACK = "rolled_back"

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_TURN_STATUSES


TERMINAL_TURN_STATUSES = frozenset(
    {TurnStatus.DONE, TurnStatus.FAILED, TurnStatus.CANCELLED, TurnStatus.ROLLED_BACK}
)
ACTIVE_TURN_STATUSES = frozenset({TurnStatus.QUEUED, TurnStatus.RUNNING})


class StepStatus(StrEnum):
    """A step on its queue: `pending` (published, waiting), `leased` (a worker holds it), or
    finished."""

    PENDING = "pending"
    LEASED = "leased"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


OPEN_STEP_STATUSES = (StepStatus.PENDING, StepStatus.LEASED)


class StepKind(StrEnum):
    """What a step does, and so which queue runs it."""

    MODEL = "model"
    TOOL = "tool"
    SUMMARIZE = "summarize"


class ToolCallStatus(StrEnum):
    """A tool call the model asked for: `pending` until its result is stored."""

    PENDING = "pending"
    DONE = "done"


class ProposalStatus(StrEnum):
    """A proposed action: decided by an operator (or expired), then executed once."""

    PENDING = "pending"
    CONFIRMED = "confirmed"
    REJECTED = "rejected"
    EXPIRED = "expired"
    EXECUTING = "executing"
    EXECUTED = "executed"
    EXECUTION_FAILED = "execution_failed"


class ToolSeverity(StrEnum):
    """How a tool result is shown: `ok`, or how bad what happened was."""

    OK = "ok"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


class RateLimitKind(StrEnum):
    """What a rate limit counts: requests or tokens per minute."""

    RPM = "rpm"
    TPM = "tpm"


class DecisionKind(StrEnum):
    """What an audit row records: a model call or a tool call."""

    MODEL = "model"
    TOOL = "tool"


class TokenScope(StrEnum):
    """What a session token allows: `read` the session and its streams, or also `chat`
    (post and cancel turns, answer proposals)."""

    CHAT = "chat"
    READ = "read"


class WebhookEventType(StrEnum):
    """What a webhook event announces (docs/webhooks.md)."""

    TURN_COMPLETED = "turn.completed"
    TURN_FAILED = "turn.failed"
    TURN_CANCELLED = "turn.cancelled"
    PROPOSAL_CREATED = "proposal.created"
    TASK_COMPLETED = "task.completed"
    JOB_COMPLETED = "job.completed"
    BATCH_COMPLETED = "batch.completed"
    BUDGET_ALERT = "budget.alert"


class WebhookShape(StrEnum):
    """How a subscription's events look: ours (`{"type", "timestamp", "data"}`), or OpenAI's
    (`response.completed`, … for the turns of responses; docs/openai-compatibility.md)."""

    CORTEX = "cortex"
    OPENAI = "openai"


class DeliveryStatus(StrEnum):
    """One event's delivery to one webhook: `pending` (retried with backoff) until the
    receiver answers 2xx (`succeeded`) or the retry period runs out (`failed`)."""

    PENDING = "pending"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class JobStatus(StrEnum):
    """An LLM-function job: `queued` → `running` → `succeeded` or `failed`."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"

    @property
    def is_terminal(self) -> bool:
        return self in (JobStatus.SUCCEEDED, JobStatus.FAILED)


class BatchStatus(StrEnum):
    """A batch of jobs: `running` until every job has ended, then `completed`."""

    RUNNING = "running"
    COMPLETED = "completed"


class LlmMode(StrEnum):
    """How freely model calls may be made, from the least to the most strict."""

    NORMAL = "normal"
    FRUGAL = "frugal"
    LOCAL_ONLY = "local-only"


class ModelTier(StrEnum):
    """A model's class in the catalog (`auto` only in a route request: the router decides)."""

    FAST = "fast"
    BALANCED = "balanced"
    DEEP = "deep"
    AUTO = "auto"


class ModelCapability(StrEnum):
    """What a model can do, as the catalog says and a route request may require."""

    TOOLS = "tools"
    VISION = "vision"
    JSON = "json"
    LONG_CONTEXT = "long_context"
    REASONING = "reasoning"


class RouteRejection(StrEnum):
    """Why the router passed over a candidate model."""

    MODE = "mode"
    PRIVACY = "privacy"
    UNAVAILABLE = "unavailable"
    CAPABILITIES = "capabilities"
    CONTEXT = "context"
    COST = "cost"
    LATENCY = "latency"
    TIER = "tier"


class RedactionKind(StrEnum):
    """What a redaction placeholder stands for (operator patterns add their own names)."""

    PROVIDER_KEY = "provider_key"
    PRIVATE_KEY = "private_key"
    CLOUD_TOKEN = "cloud_token"
    VCS_TOKEN = "vcs_token"
    API_TOKEN = "api_token"
    JWT = "jwt"
    PASSWORD = "password"
    EMAIL = "email"
    PHONE = "phone"
    CARD = "card"
    IBAN = "iban"
    IP = "ip"
    SSN = "ssn"


class ReservationStatus(StrEnum):
    """A budget reservation: held while its model call runs, then settled to what it cost."""

    RESERVED = "reserved"
    SETTLED = "settled"


class BudgetScope(StrEnum):
    """What a budget limit applies to: every tenant together, one tenant (both per day), or one
    session (its token cap, for its whole life)."""

    GLOBAL = "global"
    TENANT = "tenant"
    SESSION = "session"


class TaskStatus(StrEnum):
    """An agent task (a call of an agent): `submitted`, `working`, then one of three ends.
    The spellings are A2A's task states."""

    SUBMITTED = "submitted"
    WORKING = "working"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELED = "canceled"

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_TASK_STATUSES


TERMINAL_TASK_STATUSES = frozenset({TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELED})
OPEN_TASK_STATUSES = (TaskStatus.SUBMITTED, TaskStatus.WORKING)


class AgentMode(StrEnum):
    """How an agent's call runs: inside the turn, or after it with a follow-up turn."""

    FOREGROUND = "foreground"
    BACKGROUND = "background"


class AgentKind(StrEnum):
    """What runs an agent: a sub-agent turn, a python handler, or a remote A2A agent."""

    LLM = "llm"
    PYTHON = "python"
    A2A = "a2a"


class BlockerStatus(StrEnum):
    """A blocker on a session's whiteboard: `open` until the team resolves it."""

    OPEN = "open"
    RESOLVED = "resolved"


class WhiteboardEntryKind(StrEnum):
    """What a whiteboard log entry records (the board's recent updates)."""

    MISSION = "mission"
    PROGRESS = "progress"
    BLOCKER = "blocker"
    DECISION = "decision"
    NOTE = "note"


class TimelineKind(StrEnum):
    """What an event of a turn's execution timeline records (`GET /v1/turns/{tid}/timeline`)."""

    ROUTE = "route"
    RETRY = "retry"
    FALLBACK = "fallback"
    RATE_LIMITED = "rate_limited"
    BUDGET = "budget"
    REDACTION = "redaction"
    TOOL = "tool"
    HANDOFF = "handoff"
    ANOMALY = "anomaly"
    RECOVERY = "recovery"
    FAILURE = "failure"
    COMPLETION = "completion"


class AnomalyKind(StrEnum):
    """What a detector of the turn loop saw (`[recovery]`, docs/checkpoints.md)."""

    COST_OVERRUN = "cost_overrun"
    LATENCY_SPIKE = "latency_spike"
    SHORT_OUTPUT = "short_output"
    CONTEXT_DEGRADATION = "context_degradation"
    REPEATED_TOOL_CALL = "repeated_tool_call"
    DEPTH_EXCEEDED = "depth_exceeded"


class RecoveryAction(StrEnum):
    """What follows an anomaly: record it only, retry the step, take the next route, restore
    the last checkpoint, or end the turn `failed`."""

    CONTINUE = "continue"
    RETRY = "retry"
    FALLBACK = "fallback"
    ROLLBACK = "rollback"
    ESCALATE = "escalate"
