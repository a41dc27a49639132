"""What the OpenAI-compatible routes accept, field by field as the official SDK sends them.

A field this server does not implement is refused with 400 naming it (`Unsupported`), never
ignored: an unknown field, or a known one with a value other than its neutral one (null, an
empty list or object, or a value listed in `NEUTRAL`). docs/openai-compatibility.md lists them.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from ...messages import JsonObject
from ...providers.scripted import ScriptReply
from ...turns.options import ClientTool, TurnOptions
from ..schemas import MAX_TEXT, StorableBody
from .errors import OpenAIBadRequest, Unsupported
from .input_items import InputItem, MessageItem

SCRIPT_KEY = "script"


def _metadata_values(value: dict[str, str]) -> dict[str, str]:
    """OpenAI's limit of 512 characters a value; `script` (the scripted provider's replies,
    our extension) may be longer."""
    for key, text in value.items():
        if key != SCRIPT_KEY and len(text) > 512:
            raise ValueError(f"metadata value {key!r} is longer than 512 characters")
    return value


Metadata = Annotated[
    dict[Annotated[str, Field(max_length=64)], Annotated[str, Field(max_length=MAX_TEXT)]],
    Field(max_length=16),
    AfterValidator(_metadata_values),
]

SUPPORTED = frozenset(
    {
        "model",
        "input",
        "instructions",
        "previous_response_id",
        "conversation",
        "metadata",
        "store",
        "background",
        "stream",
        "tool_choice",
        "parallel_tool_calls",
        "user",
        "tools",
        "temperature",
        "max_output_tokens",
        "text",
    }
)
NEUTRAL: dict[str, tuple[Any, ...]] = {
    "truncation": ("disabled", "auto"),
    "service_tier": ("auto", "default"),
}
"""Values of otherwise unsupported fields that ask for what this server does anyway."""


class FunctionTool(BaseModel):
    """A `function` tool: the client runs it (`turns.options.ClientTool`)."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["function"]
    name: str = Field(min_length=1, max_length=64, pattern=r"^[a-zA-Z0-9_-]+$")
    description: str | None = Field(default=None, max_length=4096)
    parameters: JsonObject | None = None
    strict: bool | None = None


class CortexTools(BaseModel):
    """Our tool type: the operator's tools (built-in, plugin, MCP, agents), by name as a
    session's `tools` takes them (`<server>.*` for an MCP server's). They run server-side, on
    the `tools` queue, like OpenAI's hosted tools; their calls are `mcp_call` output items."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["cortex_tools"]
    names: list[Annotated[str, Field(min_length=1, max_length=200)]] = Field(
        min_length=1, max_length=128
    )


class OtherTool(BaseModel):
    """A tool of another type (`web_search`, `mcp`, …): refused by name."""

    model_config = ConfigDict(extra="allow")
    type: str


class TextFormatText(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["text"]


class TextFormatJsonSchema(BaseModel):
    """`text.format` of type `json_schema`: the answer follows the schema."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    type: Literal["json_schema"]
    name: str = Field(min_length=1, max_length=64, pattern=r"^[a-zA-Z0-9_-]+$")
    schema_: JsonObject = Field(alias="schema")
    description: str | None = None
    strict: bool | None = None


class TextFormatOther(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: str


class TextConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    format: TextFormatText | TextFormatJsonSchema | TextFormatOther | None = None
    verbosity: Literal["medium"] | None = None


class ConversationRef(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str


class ResponseCreate(StorableBody):
    """`POST /v1/responses` (NUL characters, non-finite numbers and absurd nesting refused)."""

    model_config = ConfigDict(extra="allow")
    model: str = Field(min_length=1, max_length=200)
    input: Annotated[str, Field(min_length=1, max_length=MAX_TEXT)] | list[InputItem]
    instructions: str | None = Field(default=None, max_length=MAX_TEXT)
    previous_response_id: str | None = None
    conversation: str | ConversationRef | None = None
    metadata: Metadata | None = None
    store: bool | None = None
    background: bool | None = None
    stream: bool | None = None
    tool_choice: Literal["auto", "none"] | None = None
    parallel_tool_calls: bool | None = None
    user: str | None = Field(default=None, max_length=200)
    tools: list[FunctionTool | CortexTools | OtherTool] | None = Field(default=None, max_length=128)
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_output_tokens: int | None = Field(default=None, ge=1, le=1_000_000)
    text: TextConfig | None = None

    def check_supported(self) -> None:
        """400 naming the first field this server does not implement."""
        for name, value in (self.model_extra or {}).items():
            if value is None or value == [] or value == {} or value in NEUTRAL.get(name, ()):
                continue
            raise Unsupported(name, f"{name!r} is not supported by this server")
        if self.background and self.store is False:
            raise OpenAIBadRequest("background responses need store=true", param="background")
        if self.conversation is not None and self.previous_response_id is not None:
            raise OpenAIBadRequest(
                "previous_response_id and conversation cannot both be given",
                param="previous_response_id",
            )
        for i, tool in enumerate(self.tools or ()):
            if isinstance(tool, OtherTool):
                raise Unsupported(
                    f"tools[{i}].type", f"tools of type {tool.type!r} are not supported"
                )
        names = [t.name for t in self.function_tools()]
        if len(set(names)) != len(names):
            raise OpenAIBadRequest("tools must have distinct names", param="tools")
        if len([t for t in self.tools or () if isinstance(t, CortexTools)]) > 1:
            raise OpenAIBadRequest("at most one cortex_tools entry", param="tools")
        clash = set(names) & set(self.server_tools())
        if clash:
            raise OpenAIBadRequest(
                f"function tools named like the operator's tools: {', '.join(sorted(clash))}",
                param="tools",
            )
        form = self.text.format if self.text is not None else None
        if isinstance(form, TextFormatOther):
            raise Unsupported("text.format.type", f"text.format {form.type!r} is not supported")
        if isinstance(form, TextFormatJsonSchema) and names and self.tool_choice != "none":
            raise Unsupported(
                "text.format", "text.format json_schema together with tools is not supported"
            )

    def function_tools(self) -> list[FunctionTool]:
        return [t for t in self.tools or () if isinstance(t, FunctionTool)]

    def server_tools(self) -> list[str]:
        """The operator's tools this response offers (`cortex_tools`; none by default)."""
        if self.tool_choice == "none":
            return []
        return [n for t in self.tools or () if isinstance(t, CortexTools) for n in t.names]

    def options(self) -> TurnOptions:
        """What this response asks of its model calls (`turns.options`)."""
        form = self.text.format if self.text is not None else None
        tools = () if self.tool_choice == "none" else self.function_tools()
        return TurnOptions(
            temperature=self.temperature,
            max_output_tokens=self.max_output_tokens,
            result_schema=form.schema_ if isinstance(form, TextFormatJsonSchema) else None,
            client_tools=tuple(
                ClientTool(
                    name=t.name,
                    description=t.description or "",
                    **({"parameters": t.parameters} if t.parameters else {}),
                )
                for t in tools
            ),
        )

    @property
    def conversation_id(self) -> str | None:
        if isinstance(self.conversation, ConversationRef):
            return self.conversation.id
        return self.conversation

    def script(self) -> list[JsonObject] | None:
        """`metadata["script"]`: the scripted provider's replies, as a JSON string."""
        raw = (self.metadata or {}).get(SCRIPT_KEY)
        if raw is None:
            return None
        try:
            replies = json.loads(raw)
            if not isinstance(replies, list):
                raise ValueError("not a list")
            return [
                ScriptReply.model_validate(r).model_dump(exclude_defaults=True) for r in replies
            ]
        except (ValueError, RecursionError, ValidationError) as exc:
            raise OpenAIBadRequest(
                f'metadata["script"] must be a JSON list of scripted replies: {exc}',
                param="metadata.script",
            ) from None


class ConversationCreate(StorableBody):
    """`POST /v1/conversations`."""

    model_config = ConfigDict(extra="forbid")
    items: list[MessageItem] | None = Field(default=None, max_length=20)
    metadata: Metadata | None = None


class ConversationUpdate(StorableBody):
    model_config = ConfigDict(extra="forbid")
    metadata: Metadata


class ItemsCreate(StorableBody):
    """`POST /v1/conversations/{id}/items`."""

    model_config = ConfigDict(extra="forbid")
    items: list[MessageItem] = Field(min_length=1, max_length=20)
