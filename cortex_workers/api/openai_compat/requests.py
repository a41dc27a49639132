"""What the OpenAI-compatible routes accept, field by field as the official SDK sends them.

A field this server does not implement is refused with 400 naming it (`Unsupported`), never
ignored: an unknown field, or a known one with a value other than its neutral one (null, an
empty list or object, or a value listed in `NEUTRAL`). docs/openai-compatibility.md lists them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from ...messages import JsonObject
from ...providers.scripted import ScriptReply
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
    }
)
NEUTRAL: dict[str, tuple[Any, ...]] = {
    "text": ({"format": {"type": "text"}},),
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
    model_config = ConfigDict(extra="ignore")
    type: Literal["input_image"]
    image_url: str | None = None


ContentPart = Annotated[InputText | OutputText | InputImage, Field(discriminator="type")]


class MessageItem(BaseModel):
    """A message of `input`, or an item added to a conversation."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["message"] = "message"
    role: Role
    content: Annotated[str, Field(max_length=MAX_TEXT)] | list[ContentPart]
    id: str | None = None
    status: str | None = None


class OtherItem(BaseModel):
    """An item of another type (`function_call_output`, …): refused by name."""

    model_config = ConfigDict(extra="allow")
    type: str


InputItem = MessageItem | OtherItem


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
class Turnable:
    """`input` as a turn takes it: earlier messages, extra instructions, the user's text."""

    history: list[tuple[str, str]]
    """(role, text) of the messages before the last user message: added to the session."""
    instructions: list[str]
    content: str


def part_text(item: MessageItem, where: str) -> str:
    """A message's text: its string content, or its text parts joined by newlines."""
    if isinstance(item.content, str):
        return item.content
    texts = []
    for j, part in enumerate(item.content):
        if isinstance(part, InputImage):
            raise Unsupported(f"{where}.content[{j}]", "input_image is not supported yet")
        texts.append(part.text)
    return "\n".join(texts)


def to_turn(value: str | list[InputItem]) -> Turnable:
    """`input` split into what the session gets first and the turn's own user message; the
    last item must be a user message with text."""
    if isinstance(value, str):
        return Turnable([], [], value)
    messages: list[tuple[str, str]] = []
    for i, item in enumerate(value):
        if isinstance(item, OtherItem):
            raise Unsupported(
                f"input[{i}].type", f"input items of type {item.type!r} are not supported"
            )
        messages.append((item.role, part_text(item, f"input[{i}]")))
    if not messages or messages[-1][0] != "user" or not messages[-1][1]:
        raise OpenAIBadRequest("input must end with a user message with text", param="input")
    instructions = [text for role, text in messages[:-1] if role in ("system", "developer")]
    history = [(role, text) for role, text in messages[:-1] if role in ("user", "assistant")]
    return Turnable(history, instructions, messages[-1][1])


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
