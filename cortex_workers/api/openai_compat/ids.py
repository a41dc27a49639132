"""OpenAI-style ids over our UUIDs: `resp_<turn>`, `conv_<session>`, `msg_<message>`, and the
id of a response's output message, `msg_<turn>_<step>` (known while it streams)."""

from __future__ import annotations

import uuid

from ...errors import NotFound

RESPONSE, CONVERSATION, MESSAGE = "resp_", "conv_", "msg_"


def response_id(turn_id: uuid.UUID) -> str:
    return f"{RESPONSE}{turn_id.hex}"


def conversation_id(session_id: uuid.UUID) -> str:
    return f"{CONVERSATION}{session_id.hex}"


def item_id(message_id: uuid.UUID) -> str:
    return f"{MESSAGE}{message_id.hex}"


def output_item_id(turn_id: uuid.UUID, step: int) -> str:
    return f"{MESSAGE}{turn_id.hex}_{step}"


def call_item_id(turn_id: uuid.UUID, call_id: str) -> str:
    """The id of a response's `function_call` output item (its `call_id` is the model's)."""
    return f"fc_{turn_id.hex}_{call_id}"


def server_call_item_id(turn_id: uuid.UUID, call_id: str) -> str:
    """The id of a response's `mcp_call` output item (a call of the operator's tools)."""
    return f"mcp_{turn_id.hex}_{call_id}"


def parse(value: str, prefix: str, what: str) -> uuid.UUID:
    """The UUID of an id we issued; 404 (as for an unknown id) for anything else."""
    if value.startswith(prefix) and len(value) == len(prefix) + 32:
        try:
            return uuid.UUID(hex=value[len(prefix) :])
        except ValueError:
            pass
    raise NotFound(f"{what} {value!r} not found", code=f"{what}_not_found")
