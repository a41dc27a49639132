"""What the OpenAI-compatible routes accept, field by field as the official SDK sends them.

A field this server does not implement is refused with 400 naming it (`Unsupported`), never
ignored: an unknown field, or a known one with a value other than its neutral one (null, an
empty list or object, or a value listed in `NEUTRAL`). docs/openai-compatibility.md lists them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from ...messages import JsonObject
from ...providers.scripted import ScriptReply
from ...store.replies import ToolCallDoc
from ...turns.options import ClientTool, TurnOptions
from ..schemas import MAX_TEXT, StorableBody
from .errors import OpenAIBadRequest, Unsupported

Role = Literal["user", "system", "developer", "assistant"]
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


class InputText(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["input_text"]
    text: str = Field(max_length=MAX_TEXT)


class OutputText(BaseModel):
    """An assistant message's text, as a client sends back an earlier output."""

    model_config = ConfigDict(extra="ignore")
    type: Literal["output_text"]
    text: str = Field(max_length=MAX_TEXT)


class InputImage(BaseModel):
    """An image: `image_url` is an `https:` or a `data:` URL (`file_id` is not supported;
    `detail` is left to the provider)."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["input_image"]
    image_url: str | None = None
    file_id: str | None = None
    detail: Literal["auto", "low", "high"] | None = None


ContentPart = Annotated[InputText | OutputText | InputImage, Field(discriminator="type")]


class MessageItem(BaseModel):
    """A message of `input`, or an item added to a conversation."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["message"] = "message"
    role: Role
    content: Annotated[str, Field(max_length=MAX_TEXT)] | list[ContentPart]
    id: str | None = None
    status: str | None = None


class FunctionCallItem(BaseModel):
    """A `function_call` the model made, as a client sends it back with its output (the
    fields of the output item it was that say nothing here, such as `status`, are ignored)."""

    model_config = ConfigDict(extra="ignore")
    type: Literal["function_call"]
    call_id: str = Field(min_length=1, max_length=200)
    name: str = Field(min_length=1, max_length=200)
    arguments: str = Field(max_length=MAX_TEXT)
    id: str | None = None
    status: str | None = None


class FunctionCallOutputItem(BaseModel):
    """The output of a `function_call` the client ran."""

    model_config = ConfigDict(extra="ignore")
    type: Literal["function_call_output"]
    call_id: str = Field(min_length=1, max_length=200)
    output: Annotated[str, Field(max_length=MAX_TEXT)] | list[InputText]
    id: str | None = None
    status: str | None = None

    @property
    def text(self) -> str:
        if isinstance(self.output, str):
            return self.output
        return "\n".join(part.text for part in self.output)


class OtherItem(BaseModel):
    """An item of another type (`reasoning`, `item_reference`, …): refused by name."""

    model_config = ConfigDict(extra="allow")
    type: str


class McpCallItem(BaseModel):
    """A call of the operator's tools (`mcp_call`) as a client sends an earlier output back:
    the call and its result join the history."""

    model_config = ConfigDict(extra="ignore")
    type: Literal["mcp_call"]
    id: str = Field(min_length=1, max_length=300)
    name: str = Field(min_length=1, max_length=200)
    arguments: str = Field(max_length=MAX_TEXT)
    output: str | None = Field(default=None, max_length=MAX_TEXT)
    error: Any = None


InputItem = MessageItem | FunctionCallItem | FunctionCallOutputItem | McpCallItem | OtherItem


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


@dataclass(frozen=True, slots=True)
class HistoryItem:
    """A message of `input` that joins the session's history before the turn."""

    role: Role | Literal["tool"]
    text: str
    tool_calls: list[ToolCallDoc] | None = None
    """An assistant message's function calls."""
    tool_call_id: str | None = None
    name: str | None = None
    """A tool message's call and function."""
    images: list[str] | None = None
    """A user message's images."""


@dataclass(frozen=True, slots=True)
class Turnable:
    """`input` as a turn takes it: earlier messages, extra instructions, the user's text
    (empty when the turn continues from function call outputs)."""

    history: list[HistoryItem]
    instructions: list[str]
    content: str
    outputs: list[FunctionCallOutputItem]
    """The function call outputs of `input`, in order (their calls must be known)."""
    images: list[str] = field(default_factory=list)
    """The images of the turn's own user message."""

    def stored_input(self) -> list[JsonObject]:
        """The input items as the response keeps them (its `input_items`)."""
        out: list[JsonObject] = []
        for h in self.history:
            if h.role == "tool":
                out.append(
                    {"type": "function_call_output", "call_id": h.tool_call_id, "output": h.text}
                )
                continue
            if h.text or not h.tool_calls:
                out.append(_message_doc(h.role, h.text, h.images))
            for c in h.tool_calls or ():
                arguments = json.dumps(c["arguments"])
                out.append(
                    {"type": "function_call", "call_id": c["id"], "name": c["name"],
                     "arguments": arguments}
                )  # fmt: skip
        if self.content or self.images:
            out.append(_message_doc("user", self.content, self.images))
        return out


def _message_doc(role: str, text: str, images: list[str] | None) -> JsonObject:
    doc: JsonObject = {"role": role, "text": text}
    if images:
        doc["images"] = list(images)
    return doc


def part_text(item: MessageItem, where: str) -> str:
    """A message's text: its string content, or its text parts joined by newlines."""
    if isinstance(item.content, str):
        return item.content
    return "\n".join(p.text for p in item.content if not isinstance(p, InputImage))


def part_images(item: MessageItem, where: str) -> list[str]:
    """A user message's `input_image` URLs (checked by the caller: `api.images`)."""
    if isinstance(item.content, str):
        return []
    urls = []
    for j, part in enumerate(item.content):
        if not isinstance(part, InputImage):
            continue
        at = f"{where}.content[{j}]"
        if part.file_id is not None or part.image_url is None:
            raise Unsupported(
                f"{at}.file_id", "input_image needs image_url; file_id is not supported"
            )
        if item.role != "user":
            raise OpenAIBadRequest("only user messages may carry images", param=at)
        urls.append(part.image_url)
    return urls


def _arguments(item: FunctionCallItem | McpCallItem, where: str) -> JsonObject:
    try:
        value = json.loads(item.arguments) if item.arguments.strip() else {}
    except (ValueError, RecursionError):
        value = None
    if not isinstance(value, dict):
        raise OpenAIBadRequest(f"{where}.arguments must be a JSON object", param=where)
    return value


def to_turn(value: str | list[InputItem], known_calls: dict[str, str]) -> Turnable:
    """`input` split into what the session gets first and the turn's own user message. It
    ends with a user message with text, or with `function_call_output` items whose calls are
    in `input` or in `known_calls` (call id → function name: the calls the response it
    continues made)."""
    if isinstance(value, str):
        return Turnable([], [], value, [])
    items: list[HistoryItem] = []
    instructions: list[str] = []
    calls = dict(known_calls)
    outputs: list[FunctionCallOutputItem] = []
    for i, item in enumerate(value):
        where = f"input[{i}]"
        match item:
            case OtherItem():
                raise Unsupported(
                    f"{where}.type", f"input items of type {item.type!r} are not supported"
                )
            case MessageItem(role="system" | "developer"):
                instructions.append(part_text(item, where))
            case MessageItem():
                images = part_images(item, where) or None
                items.append(HistoryItem(item.role, part_text(item, where), images=images))
            case FunctionCallItem():
                call: ToolCallDoc = {
                    "id": item.call_id, "name": item.name,
                    "arguments": _arguments(item, where),
                }  # fmt: skip
                calls[item.call_id] = item.name
                last = items[-1] if items else None
                if last is not None and last.role == "assistant" and last.tool_calls is not None:
                    last.tool_calls.append(call)  # calls of one answer: one message
                else:
                    items.append(HistoryItem("assistant", "", [call]))
            case McpCallItem():
                ran: ToolCallDoc = {
                    "id": item.id, "name": item.name,
                    "arguments": _arguments(item, where),
                }  # fmt: skip
                result = item.output if item.output is not None else json.dumps(item.error)
                items.append(HistoryItem("assistant", "", [ran]))
                items.append(HistoryItem("tool", result, tool_call_id=item.id, name=item.name))
            case FunctionCallOutputItem():
                name = calls.get(item.call_id)
                if name is None:
                    raise OpenAIBadRequest(
                        f"No tool call found for function call output with call_id {item.call_id}.",
                        param=f"{where}.call_id",
                    )
                items.append(HistoryItem("tool", item.text, tool_call_id=item.call_id, name=name))
                outputs.append(item)
    last = items[-1] if items else None
    if last is not None and last.role == "user" and (last.text or last.images):
        return Turnable(items[:-1], instructions, last.text, outputs, list(last.images or ()))
    if last is not None and last.role == "tool":
        return Turnable(items, instructions, "", outputs)
    raise OpenAIBadRequest(
        "input must end with a user message with text or images, or with function_call_output "
        "items",
        param="input",
    )


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
