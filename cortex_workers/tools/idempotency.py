"""Idempotency keys of tool calls (docs/mcp.md, "Exactly once").

A call's key is derived from its turn, the model step that asked for it and the provider's
call id, so every retry and takeover of the call carries the same key, and no other call
does. It is sent as `Idempotency-Key` to plugin HTTP tools, in `_meta` to MCP tools, and is
`ToolContext.idempotency_key` for python tools.
"""

from __future__ import annotations

import uuid

NAMESPACE = uuid.UUID("8f3c1d2e-6b7a-4f19-9c55-2d0e7a4b1c63")
HEADER = "Idempotency-Key"
MCP_META_KEY = "io.cortex-workers/idempotency-key"


def idempotency_key(turn_id: uuid.UUID | str, model_step_no: int, call_id: str) -> str:
    """The key of the call `call_id` asked for by model step `model_step_no` of `turn_id`."""
    return f"cw-{uuid.uuid5(NAMESPACE, f'{turn_id}/{model_step_no}/{call_id}')}"


def proposal_key(proposal_id: uuid.UUID | str) -> str:
    """The key of a confirmed proposal's execution (one per proposal, whoever runs it)."""
    return f"cw-proposal-{proposal_id}"
