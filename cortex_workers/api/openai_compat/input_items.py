"""The items of `input` as the Responses API takes them (messages with text and image parts,
function calls and their outputs, calls of the operator's tools sent back), and how they split
into the history a turn starts from and the turn's own user message (`to_turn`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Annotated, Literal, TypedDict

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from ...messages import JsonObject
from ...store.replies import ToolCallDoc
from ..schemas import MAX_TEXT
from .errors import OpenAIBadRequest, Unsupported

Role = Literal["user", "system", "developer", "assistant"]


class StoredItem(TypedDict, total=False):
    """An input item as a response keeps it (its `input_items`): a message (`role`, `text`,
    `images`), or a `function_call` / `function_call_output` (`type` and its fields)."""

    type: Literal["function_call", "function_call_output"]
    role: str
    text: str
    images: list[str]
    call_id: str
    name: str
    arguments: str
    output: str


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
    error: JsonValue = None


InputItem = MessageItem | FunctionCallItem | FunctionCallOutputItem | McpCallItem | OtherItem


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

    def stored_input(self) -> list[StoredItem]:
        """The input items as the response keeps them (its `input_items`)."""
        out: list[StoredItem] = []
        for h in self.history:
            if h.role == "tool":
                out.append(
                    {"type": "function_call_output", "call_id": h.tool_call_id or "",
                     "output": h.text}
                )  # fmt: skip
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


def _message_doc(role: str, text: str, images: list[str] | None) -> StoredItem:
    doc: StoredItem = {"role": role, "text": text}
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


def _ran(item: McpCallItem, where: str) -> list[HistoryItem]:
    """A call of the operator's tools sent back: the call, then its result."""
    call: ToolCallDoc = {"id": item.id, "name": item.name, "arguments": _arguments(item, where)}
    result = item.output if item.output is not None else json.dumps(item.error)
    return [
        HistoryItem("assistant", "", [call]),
        HistoryItem("tool", result, tool_call_id=item.id, name=item.name),
    ]


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
                items += _ran(item, where)
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
