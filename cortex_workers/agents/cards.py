"""An agent's card: what it does, how it is called and what runs it (pydantic, validated when
loaded; a bad card is rejected with its reason, never fatal)."""

from __future__ import annotations

import re
from typing import Annotated, Literal

import jsonschema
from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..messages import JsonObject
from ..vocabulary import AgentKind, AgentMode

NAME = re.compile(r"^[a-z][a-z0-9_]{0,57}$")
DEFAULT_INPUT_SCHEMA: JsonObject = {
    "type": "object",
    "properties": {"task": {"type": "string", "description": "What the agent should do."}},
    "required": ["task"],
    "additionalProperties": False,
}


class Skill(BaseModel):
    """One thing the agent is good at (A2A's AgentSkill, its required fields)."""

    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1, max_length=200)
    name: str = Field(min_length=1, max_length=200)
    description: str = Field(default="", max_length=2000)


class _Card(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    description: str = Field(min_length=1, max_length=2000)
    skills: list[Skill] = Field(default_factory=list)
    input_schema: JsonObject = Field(default_factory=lambda: dict(DEFAULT_INPUT_SCHEMA))
    mode: AgentMode = AgentMode.FOREGROUND
    timeout_s: float = Field(default=300.0, gt=0, le=86_400)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not NAME.match(value):
            raise ValueError("must be lowercase letters, digits and _ (starting with a letter)")
        return value

    @field_validator("input_schema")
    @classmethod
    def _schema(cls, value: JsonObject) -> JsonObject:
        jsonschema.Draft202012Validator.check_schema(value)
        if value.get("type") != "object":
            raise ValueError('must be a JSON Schema of "type": "object"')
        return value


class LlmCard(_Card):
    """A sub-agent: a child turn with its own prompt, model and tools."""

    kind: Literal[AgentKind.LLM] = AgentKind.LLM
    system_prompt: str = Field(default="", max_length=100_000)
    provider: str | None = None
    model: str | None = None
    tools: list[str] = Field(default_factory=list)
    agents: list[str] = Field(default_factory=list)
    metadata: JsonObject = Field(default_factory=dict)
    """The child session's metadata (`script` drives the scripted provider)."""


class PythonCard(_Card):
    """A python handler `module:function`, run on the `agents` queue."""

    kind: Literal[AgentKind.PYTHON] = AgentKind.PYTHON
    handler: str = Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


class A2aCard(_Card):
    """A remote agent speaking A2A at `url`."""

    kind: Literal[AgentKind.A2A] = AgentKind.A2A
    url: str = Field(pattern=r"^https?://")
    allow_private: bool = False
    """Allow a loopback or private host (like `allow_private_host` of plugin manifests)."""
    poll_s: float = Field(default=1.0, gt=0, le=60)


AgentCard = Annotated[LlmCard | PythonCard | A2aCard, Field(discriminator="kind")]
