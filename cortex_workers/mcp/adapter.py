"""An MCP server's tools as ours, and their results as what the model reads.

A tool's name here is the server's `tool_prefix` (default `<server>_`) and its own name, made
to fit every provider's rule. Its `read_only` and `idempotent` come from the tool's
annotations (`readOnlyHint`, `idempotentHint`) unless the operator's settings say otherwise.
Results: text blocks joined, `structuredContent` as `structured`, resource links and embedded
resources by uri, images and audio described by type in `media`; the images themselves are
passed on beside the result (`WithImages`), to be sent to the model where the provider takes
them (docs/mcp.md). An `isError` result raises `ToolFailed`, which the model reads as an
error result. A call of an HTTP server offers the Tasks extension (`tasks`): an answer that is
a task handle is returned as `RemoteTask`, and a look at the task (`poll_of`) maps its
result the same way.
"""

from __future__ import annotations

import re
from typing import Any

from mcp_types import (
    AudioContent,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
)
from mcp_types import Tool as McpTool
from pydantic import JsonValue, ValidationError

from ..mcp_settings import McpServerSettings
from ..messages import JsonObject
from ..tools.idempotency import MCP_META_KEY
from ..tools.registry import Tool
from ..tools.remote_tasks import RemoteTask, TaskPoll, poll_wait
from ..tools.results import ProposalRequest, ToolContext, ToolFailed, ToolImage, WithImages
from ..vocabulary import ToolSeverity
from .connection import McpServer
from .tasks import TaskDoc, TaskHandle

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
CONFIRMED_ACTION = "mcp:"
"""The action of a proposal that is an MCP call awaiting confirmation: `mcp:<server>:<tool>`."""


def local_name(config: McpServerSettings, server: str, tool: str) -> str:
    """The name the model calls `tool` of `server` by."""
    prefix = f"{server}_" if config.tool_prefix is None else config.tool_prefix
    return _UNSAFE.sub("_", prefix + tool)[:64]


class McpToolCall:
    """The `fn` of an MCP tool: one `tools/call` with the call's idempotency key in `_meta`."""

    __slots__ = ("server", "remote_name", "timeout_s", "confirm")

    def __init__(self, server: McpServer, remote_name: str, *, confirm: bool) -> None:
        self.server, self.remote_name = server, remote_name
        self.timeout_s, self.confirm = server.config.timeout, confirm

    def __repr__(self) -> str:
        return f"McpToolCall(server={self.server.name!r}, tool={self.remote_name!r})"

    def __call__(self, ctx: ToolContext, /, **arguments: Any) -> Any:
        if self.confirm:
            return ProposalRequest(
                action=f"{CONFIRMED_ACTION}{self.server.name}:{self.remote_name}",
                product=self.server.name,
                rationale=f"{self.remote_name} on {self.server.name} asks for confirmation",
                params=arguments,
            )
        return self.send(arguments, key=ctx.idempotency_key, tasks=True)

    def send(self, arguments: JsonObject, *, key: str | None, tasks: bool = False) -> Any:
        """Call the tool now; its result as the model reads it. With `tasks`, an HTTP server
        may answer with a task instead (returned as `RemoteTask`)."""
        meta = {MCP_META_KEY: key} if key is not None else {}
        result = self.server.call_tool(
            self.remote_name, arguments, meta=meta, timeout=self.timeout_s, tasks=tasks
        )
        if isinstance(result, TaskHandle):
            return remote_task(self.server, result)
        return to_result(result)


def remote_task(server: McpServer, handle: TaskHandle) -> RemoteTask:
    """A task handle as the call's answer: how long to wait for it and how often to look."""
    wait = server.config.task_timeout
    if handle.ttl_ms is not None:
        wait = min(wait, handle.ttl_ms / 1000)
    return RemoteTask(
        server=server.name,
        task_id=handle.task_id,
        poll_s=poll_wait(handle.poll_interval_ms),
        wait_s=wait,
        message=handle.status_message,
    )


def adapt(server: McpServer, tools: list[McpTool]) -> list[Tool]:
    """The server's tools that `allowed_tools` lets through, as our tools."""
    config = server.config
    allowed = None if config.allowed_tools is None else set(config.allowed_tools)
    out: list[Tool] = []
    for t in tools:
        if allowed is not None and t.name not in allowed:
            continue
        own = config.tools.get(t.name)
        hints = t.annotations
        read_only = own.read_only if own and own.read_only is not None else None
        if read_only is None:
            read_only = bool(hints and hints.read_only_hint)
        idempotent = own.idempotent if own and own.idempotent is not None else None
        if idempotent is None:
            idempotent = bool(hints and hints.idempotent_hint)
        confirm = bool(own and own.require_confirmation)
        schema = dict(t.input_schema) if t.input_schema else {}
        schema.setdefault("type", "object")
        out.append(
            Tool(
                name=local_name(config, server.name, t.name),
                description=(t.description or t.title or t.name)[:1024],
                parameters=schema,
                fn=McpToolCall(server, t.name, confirm=confirm),
                takes_context=True,
                timeout_s=config.timeout,
                max_timeout_s=config.timeout,
                read_only=read_only and not confirm,
                idempotent=idempotent,
                source=f"mcp:{server.name}",
                severity=ToolSeverity(own.severity) if own and own.severity else None,
                server=server.name,
            )
        )
    return out


def to_result(result: CallToolResult) -> Any:
    """What the model reads of a `tools/call` result."""
    texts: list[str] = []
    links: list[JsonValue] = []
    media: list[JsonValue] = []
    images: list[ToolImage] = []
    for block in result.content:
        match block:
            case TextContent(text=text):
                texts.append(text)
            case ResourceLink():
                links.append({"uri": str(block.uri), "name": block.name})
            case EmbeddedResource(resource=resource):
                body = getattr(resource, "text", None)
                links.append({"uri": str(resource.uri), **({"text": body} if body else {})})
            case ImageContent(mime_type=mime, data=data):
                media.append({"type": block.type, "mime_type": mime})
                images.append(ToolImage(mime, data))
            case AudioContent(mime_type=mime):
                media.append({"type": block.type, "mime_type": mime})
    text = "\n".join(texts)
    if result.is_error:
        raise ToolFailed(text or "the tool reported an error")
    if result.structured_content is None and not links and not media:
        return {"text": text}
    out: JsonObject = {"text": text} if text else {}
    if result.structured_content is not None:
        out["structured"] = result.structured_content
    if links:
        out["resources"] = links
    if media:
        out["media"] = media
    return WithImages(out, tuple(images)) if images else out


def poll_of(doc: TaskDoc) -> TaskPoll:
    """What a look at the task found; the result of a completed task as a call's result."""
    wait = poll_wait(doc.poll_interval_ms)
    match doc.status:
        case "working" | "input_required":
            return TaskPoll(working=True, poll_s=wait)
        case "completed":
            try:
                return TaskPoll(
                    working=False, result=to_result(CallToolResult.model_validate(doc.result))
                )
            except ToolFailed as failed:
                return TaskPoll(working=False, failure=str(failed))
            except ValidationError:
                return TaskPoll(working=False, failure="the task's result is not a tool result")
        case "failed":
            error = doc.error or {}
            why = error.get("message") or doc.status_message or "no reason given"
            return TaskPoll(working=False, failure=f"the task failed: {why}")
        case "cancelled":
            why = f": {doc.status_message}" if doc.status_message else ""
            return TaskPoll(working=False, failure=f"the task was cancelled by its server{why}")
