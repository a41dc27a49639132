"""The Python client of the cortex-workers API.

    from cortex_workers.client import Client
    cw = Client("http://127.0.0.1:8000", api_key)
    answer = cw.ask(cw.sessions.create(name="demo").id, "hello")

It imports httpx, httpx-sse and pydantic only (plus the package's pure value modules), so an
application can use it without the server's dependencies. See docs/client.md.

`AsyncClient` (in `aio/`) is the source of `Client`: `sync/` is generated from `aio/` by
scripts/unasync_client.py, and what both share (requests, the retry policy, the stream's
position and text, a function's spec) is in the modules beside them.
"""

from .aio import AsyncClient, AsyncFunction, AsyncTurnStream
from .errors import (
    APIError,
    BudgetExhausted,
    Conflict,
    ConnectionFailed,
    CortexClientError,
    IdempotencyKeyReused,
    InvalidRequest,
    JobFailed,
    NotFound,
    ProposalDecided,
    RateLimited,
    ServiceUnavailable,
    SessionBusy,
    SessionTokenCap,
    TurnCancelled,
    TurnFailed,
    TurnFinished,
    Unauthorized,
    UserRateLimited,
)
from .events import (
    DoneEvent,
    ErrorEvent,
    Event,
    MessageEvent,
    ProposalEvent,
    StepRestartEvent,
    TokenEvent,
    ToolCallEvent,
    ToolProgressEvent,
    ToolResultEvent,
    UnknownEvent,
    Usage,
)
from .models import Answer, Job, Proposal, Session, Turn, TurnAccepted, Webhook
from .sync import Client, Function, TurnStream

__all__ = [
    "APIError",
    "Answer",
    "AsyncClient",
    "AsyncFunction",
    "AsyncTurnStream",
    "BudgetExhausted",
    "Client",
    "Conflict",
    "ConnectionFailed",
    "CortexClientError",
    "DoneEvent",
    "ErrorEvent",
    "Event",
    "Function",
    "IdempotencyKeyReused",
    "InvalidRequest",
    "Job",
    "JobFailed",
    "MessageEvent",
    "NotFound",
    "Proposal",
    "ProposalDecided",
    "ProposalEvent",
    "RateLimited",
    "ServiceUnavailable",
    "Session",
    "SessionBusy",
    "SessionTokenCap",
    "StepRestartEvent",
    "TokenEvent",
    "ToolCallEvent",
    "ToolProgressEvent",
    "ToolResultEvent",
    "Turn",
    "TurnAccepted",
    "TurnCancelled",
    "TurnFailed",
    "TurnFinished",
    "TurnStream",
    "Unauthorized",
    "UnknownEvent",
    "Usage",
    "UserRateLimited",
    "Webhook",
]
