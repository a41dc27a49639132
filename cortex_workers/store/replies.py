"""The values of a model step's reply as the statement that ends the step stores them
(`store.step_commit`): its usage, its message, its audit row, the error a turn ends with."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from pydantic import ConfigDict, with_config
from typing_extensions import TypedDict

from ..messages import ErrorDoc, JsonObject
from ..vocabulary import TurnStatus

__all__ = [
    "Answer",
    "ErrorDoc",
    "ModelCallAudit",
    "SessionCounters",
    "ToolCallDoc",
    "TurnTotals",
    "Usage",
    "WarningDoc",
]


@with_config(ConfigDict(extra="allow"))  # the API shows a stored document whole
class ToolCallDoc(TypedDict):
    """A tool call as an assistant message stores it."""

    id: str
    name: str
    arguments: JsonObject


@with_config(ConfigDict(extra="allow"))  # the API shows a stored document whole
class WarningDoc(TypedDict):
    """A warning a turn records (`turns.warnings`), e.g. tools offered through the prompt."""

    code: str
    message: str
    step: int


@dataclass(frozen=True, slots=True)
class Usage:
    """The model step's usage, set on its row as it finishes."""

    provider: str
    model: str
    fallback_from: str | None
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost_usd: float
    latency_ms: int


@dataclass(frozen=True, slots=True)
class Answer:
    """The assistant message; its session, turn, step and seq are the statement's own."""

    id: uuid.UUID
    content: str
    tool_calls: list[ToolCallDoc] | None


@dataclass(frozen=True, slots=True)
class ModelCallAudit:
    """The audit row of the model call; its session, turn, step, attempt and latency are the
    statement's own."""

    tenant_id: uuid.UUID
    name: str
    """`provider:model`."""
    input: JsonObject
    output: JsonObject


@dataclass(frozen=True, slots=True)
class SessionCounters:
    last_message_seq: int
    summary_upto_seq: int
    last_turn_seq: int


@dataclass(frozen=True, slots=True)
class TurnTotals:
    """The turn after the reply was counted in it (and, maybe, it ended)."""

    id: uuid.UUID
    seq: int
    status: TurnStatus
    input_tokens: int
    output_tokens: int
    cost_usd: float
    error: ErrorDoc | None
