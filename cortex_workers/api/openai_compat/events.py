"""Our turn events as the Responses API's stream events, each with a gap-free
`sequence_number`.

The translation is a function of the turn's stream from its beginning, so resuming with
`starting_after=N` replays the stream, translates it again and sends what comes after event N:
the same events with the same numbers, whether the stream is live or was rebuilt from Postgres
(where each model step's text is one delta). A model step restarted after a crash
(`step_restart`) closes its partial message as `incomplete`; the next attempt's text is a new
output item, and the terminal event's response holds only what was stored.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field

from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseContentPartAddedEvent,
    ResponseContentPartDoneEvent,
    ResponseCreatedEvent,
    ResponseFailedEvent,
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseFunctionCallArgumentsDoneEvent,
    ResponseFunctionToolCall,
    ResponseIncompleteEvent,
    ResponseInProgressEvent,
    ResponseOutputItem,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
    ResponseOutputText,
    ResponseQueuedEvent,
    ResponseStreamEvent,
    ResponseTextDeltaEvent,
    ResponseTextDoneEvent,
)
from openai.types.responses.response_output_item import McpCall

from ...store.replies import ToolCallDoc
from ...streaming import Entry
from .views import Result, function_call, output_message, server_call


@dataclass
class _Item:
    step: int
    index: int
    text: str = ""


@dataclass
class Translator:
    """Turns the entries of one turn's stream into Responses events."""

    turn_id: uuid.UUID
    initial: Response
    """The response as `response.created` shows it (status queued or in_progress, no output)."""
    background: bool
    client_tools: frozenset[str] = frozenset()
    """The response's `function` tools: their calls are `function_call` items; the calls of
    the operator's tools are `mcp_call` items, done when their result arrives."""
    sequence: int = 0
    outputs: int = 0
    item: _Item | None = None
    running: dict[str, tuple[int, McpCall]] = field(default_factory=dict)
    """The open `mcp_call` items by call id: (output index, item)."""

    def _next(self) -> int:
        n = self.sequence
        self.sequence += 1
        return n

    def _added(self, item: ResponseOutputItem, index: int) -> ResponseOutputItemAddedEvent:
        return ResponseOutputItemAddedEvent(
            type="response.output_item.added",
            item=item,
            output_index=index,
            sequence_number=self._next(),
        )

    def _done(self, item: ResponseOutputItem, index: int) -> ResponseOutputItemDoneEvent:
        return ResponseOutputItemDoneEvent(
            type="response.output_item.done",
            item=item,
            output_index=index,
            sequence_number=self._next(),
        )

    def opening(self) -> list[ResponseStreamEvent]:
        out: list[ResponseStreamEvent] = [
            ResponseCreatedEvent(
                type="response.created", response=self.initial, sequence_number=self._next()
            )
        ]
        if self.background:
            out.append(
                ResponseQueuedEvent(
                    type="response.queued", response=self.initial, sequence_number=self._next()
                )
            )
        running = self.initial.model_copy(update={"status": "in_progress"})
        out.append(
            ResponseInProgressEvent(
                type="response.in_progress", response=running, sequence_number=self._next()
            )
        )
        return out

    def feed(self, entry: Entry) -> list[ResponseStreamEvent]:
        """The events one of our stream entries becomes (none for most tool traffic)."""
        data = json.loads(entry.data) if entry.data else {}
        match entry.event:
            case "token":
                return self._delta(int(data.get("step", 0)), str(data.get("text", "")))
            case "message":
                return self._close("completed")
            case "tool_call" if str(data.get("name", "")) in self.client_tools:
                return self._close("completed") + self._call(data)
            case "tool_call":
                return self._close("completed") + self._server_call(data)
            case "tool_result":
                return self._server_result(data)
            case "step_restart":
                return self._close("incomplete")
            case _:
                return []

    def _delta(self, step: int, text: str) -> list[ResponseStreamEvent]:
        out: list[ResponseStreamEvent] = []
        if self.item is not None and self.item.step != step:
            out += self._close("completed")
        if self.item is None:
            self.item = _Item(step, self.outputs)
            self.outputs += 1
            out += self._open(self.item)
        if text:
            self.item.text += text
            out.append(
                ResponseTextDeltaEvent(
                    type="response.output_text.delta",
                    item_id=self._item_id(self.item),
                    output_index=self.item.index,
                    content_index=0,
                    delta=text,
                    logprobs=[],
                    sequence_number=self._next(),
                )
            )
        return out

    def _server_call(self, data: dict[str, object]) -> list[ResponseStreamEvent]:
        """A call of the operator's tools: an `mcp_call` item, open until its result."""
        item = server_call(self.turn_id, _call_doc(data), None)
        index = self.outputs
        self.outputs += 1
        self.running[str(data.get("id", ""))] = (index, item)
        return [self._added(item, index)]

    def _server_result(self, data: dict[str, object]) -> list[ResponseStreamEvent]:
        opened = self.running.pop(str(data.get("id", "")), None)
        if opened is None:
            return []
        index, item = opened
        result = Result(str(data.get("content", "")), bool(data.get("is_error")))
        call: ToolCallDoc = {"id": str(data.get("id", "")), "name": item.name,
                             "arguments": json.loads(item.arguments)}  # fmt: skip
        return [self._done(server_call(self.turn_id, call, result), index)]

    def _call(self, data: dict[str, object]) -> list[ResponseStreamEvent]:
        """A function call the model made, as one output item (its arguments are whole when
        our stream carries the call)."""
        done = function_call(self.turn_id, _call_doc(data))
        index = self.outputs
        self.outputs += 1
        opened = ResponseFunctionToolCall.model_validate(
            {**done.model_dump(), "arguments": "", "status": "in_progress"}
        )
        return [
            self._added(opened, index),
            ResponseFunctionCallArgumentsDeltaEvent(
                type="response.function_call_arguments.delta",
                item_id=str(done.id),
                output_index=index,
                delta=done.arguments,
                sequence_number=self._next(),
            ),
            ResponseFunctionCallArgumentsDoneEvent(
                type="response.function_call_arguments.done",
                item_id=str(done.id),
                output_index=index,
                arguments=done.arguments,
                sequence_number=self._next(),
            ),
            self._done(done, index),
        ]

    def _item_id(self, item: _Item) -> str:
        return output_message(self.turn_id, item.step, "", status="in_progress").id

    def _open(self, item: _Item) -> list[ResponseStreamEvent]:
        message = output_message(self.turn_id, item.step, "", status="in_progress")
        return [
            self._added(message, item.index),
            ResponseContentPartAddedEvent(
                type="response.content_part.added",
                item_id=message.id,
                output_index=item.index,
                content_index=0,
                part=ResponseOutputText(type="output_text", text="", annotations=[]),
                sequence_number=self._next(),
            ),
        ]

    def _close(self, status: str) -> list[ResponseStreamEvent]:
        item, self.item = self.item, None
        if item is None:
            return []
        message = output_message(
            self.turn_id,
            item.step,
            item.text,
            status="completed" if status == "completed" else "incomplete",
        )
        text = ResponseOutputText(type="output_text", text=item.text, annotations=[])
        return [
            ResponseTextDoneEvent(
                type="response.output_text.done",
                item_id=message.id,
                output_index=item.index,
                content_index=0,
                text=item.text,
                logprobs=[],
                sequence_number=self._next(),
            ),
            ResponseContentPartDoneEvent(
                type="response.content_part.done",
                item_id=message.id,
                output_index=item.index,
                content_index=0,
                part=text,
                sequence_number=self._next(),
            ),
            self._done(message, item.index),
        ]

    def closing(self, final: Response) -> list[ResponseStreamEvent]:
        """The open item (if any) and the one terminal event, for the response as stored."""
        out = self._close("incomplete" if final.status != "completed" else "completed")
        n = self._next()
        match final.status:
            case "completed":
                out.append(
                    ResponseCompletedEvent(
                        type="response.completed", response=final, sequence_number=n
                    )
                )
            case "incomplete":
                out.append(
                    ResponseIncompleteEvent(
                        type="response.incomplete", response=final, sequence_number=n
                    )
                )
            case _:  # failed, cancelled
                out.append(
                    ResponseFailedEvent(type="response.failed", response=final, sequence_number=n)
                )
        return out


def _call_doc(data: dict[str, object]) -> ToolCallDoc:
    """A `tool_call` entry of our stream as the stored call."""
    arguments = data.get("arguments")
    return {
        "id": str(data.get("id", "")),
        "name": str(data.get("name", "")),
        "arguments": arguments if isinstance(arguments, dict) else {},
    }
