"""What one turn asks of its model calls, beyond its session's settings: sampling, an output
limit, a JSON Schema the answer follows, and tools its client runs itself.

The OpenAI-compatible Responses API sets them per response (docs/openai-compatibility.md).
They are stored on the turn (`turns.options`, NULL when the turn asks nothing) and read with
the model step's claim, so a turn without options costs nothing.

A *client tool* is offered to the model like any tool, but no worker runs it: a model step
that calls one ends the turn with the call in its stored message, and the client continues
with the call's output (a `function_call_output` item) in a later turn.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from ..messages import JsonObject, ToolSpec

CUT_OFF = "max_output_tokens"
"""The warning of a turn whose answer stopped at its output token limit."""


def _no_parameters() -> JsonObject:
    return {"type": "object", "properties": {}}


class ClientTool(BaseModel):
    """A tool the client answers (an OpenAI `function` tool)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[a-zA-Z0-9_-]+$")]
    description: Annotated[str, Field(max_length=4096)] = ""
    parameters: JsonObject = Field(default_factory=_no_parameters)

    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, self.parameters)


class AgentCall(BaseModel):
    """A turn that runs one agent with these arguments instead of asking a model: its first
    model step calls `<agent>_agent`, its second answers with the agent's result (an MCP
    client calling the agent's tool on `/mcp`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    agent: Annotated[str, Field(min_length=1, max_length=58)]
    arguments: JsonObject


class TurnOptions(BaseModel):
    """A turn's own settings for its model calls (a field left at None: the session's)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    max_output_tokens: Annotated[int, Field(ge=1, le=1_000_000)] | None = None
    result_schema: JsonObject | None = None
    """A JSON Schema the answer must follow (structured output, as a job's `result_schema`)."""
    client_tools: tuple[ClientTool, ...] = ()
    agent_call: AgentCall | None = None
    images: tuple[str, ...] = ()
    """The images of the turn's user message (stored with the message; the model step's
    claim reads the options without them)."""

    def stored(self) -> JsonObject | None:
        """As the turn stores it: None when the turn asks nothing of its own."""
        doc = self.model_dump(mode="json", exclude_defaults=True)
        return doc or None

    @classmethod
    def of(cls, stored: JsonObject | None) -> TurnOptions:
        return NONE if not stored else cls.model_validate(stored)

    def client_tool_names(self) -> frozenset[str]:
        return frozenset(t.name for t in self.client_tools)


NONE = TurnOptions()
