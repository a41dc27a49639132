"""What tools return and raise, besides plain JSON values.

- `Page`: one page of a larger result; the router signs `next` into an opaque `next_cursor`.
- `UpstreamError`: the system behind the tool answered with an HTTP error.
- `ToolInputError`: the arguments are well-formed but wrong (the model can correct them).
- `ProposalRequest`: `propose_action`'s only effect: a proposal for an operator to confirm.
- `ToolContext`: who is calling (session, turn, call), the call's idempotency key and the
  decoded cursor, for tools that ask (and, through `current_call`, for any tool).
- `ToolFailed`: the tool itself reported a failure (an MCP `isError` result).
- `WithImages`: a result and the images that come with it (an MCP tool's `ImageContent`).
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field

from ..errors import ToolError
from ..messages import JsonObject


@dataclass(frozen=True, slots=True)
class ToolContext:
    """The call's circumstances, passed to tools registered with `takes_context=True`."""

    session_id: str
    session_name: str | None
    """Chosen by the tenant: for display only, never for authorization."""
    turn_id: str
    call_id: str
    cursor: JsonObject | None = None
    """The decoded `cursor` argument of a paginated tool (None on the first page)."""
    tenant_id: str = ""
    tenant_name: str | None = None
    """The operator's name of the tenant (`keys create --tenant NAME`): what a tool's
    `allowed_tenants` globs match."""
    idempotency_key: str | None = None
    """Stable across retries and takeovers of this call: a receiver that remembers it can
    recognise a repeat (docs/mcp.md, "Exactly once")."""


current_call: ContextVar[ToolContext | None] = ContextVar("current_call", default=None)
"""The call being run, in the thread that runs it (set by the router)."""


class ToolFailed(Exception):
    """The tool answered with a failure of its own (shown to the model as an error result)."""


@dataclass(frozen=True, slots=True)
class Page:
    """One page: `data` is the JSON object returned; `next` is the state of the next page."""

    data: JsonObject
    next: JsonObject | None = None


class UpstreamError(Exception):
    """The upstream system answered `status` (`reason` is shown to the model)."""

    def __init__(self, status: int, reason: str = "") -> None:
        super().__init__(f"upstream: {status} {reason}".strip())
        self.status = status
        self.reason = reason


class ToolInputError(ToolError):
    """Arguments that pass the schema but make no sense (e.g. division by zero)."""


@dataclass(frozen=True, slots=True)
class ProposalRequest:
    """An action proposed for an operator to confirm; nothing is executed by the model."""

    action: str
    product: str
    rationale: str
    params: JsonObject = field(default_factory=dict)
    blast_radius: str | None = None
    reversible: bool | None = None


@dataclass(frozen=True, slots=True)
class ToolImage:
    """An image a tool returned: its type (`image/png`, …) and its bytes in base64."""

    mime_type: str
    data: str


@dataclass(frozen=True, slots=True)
class WithImages:
    """A result and its images. `value` is what the model reads, capped as any result; the
    images are passed to the model beside it, where the provider takes them, each within the
    limits of a user's images (`image_max_bytes`, `images_per_message`); docs/mcp.md."""

    value: object
    images: tuple[ToolImage, ...]
