"""The tool router (docs/tools.md): resolve, authorize, validate, run with a deadline, cap, sign.

Every failure comes back as a result the model reads, classified as in docs/tools.md (the
severity tells a UI how to colour it: none, gray, yellow, red):

| failure                                 | is_error | content                      | severity |
| --------------------------------------- | -------- | ---------------------------- | -------- |
| unknown tool, schema validation, cursor | yes      | `validation: …`              | warning  |
| tool not allowed in this session        | yes      | `forbidden: …`               | warning  |
| arguments make no sense (ToolInputError)| yes      | `invalid: …`                 | warning  |
| plugin target refused by the SSRF guard | yes      | `blocked: …`                 | error    |
| slow, but done before the hard ceiling  | no       | the result                   | warning  |
| hard ceiling exceeded                   | yes      | `{"error": "tool_timeout", …}`| warning  |
| upstream answered 5xx / 4xx             | yes      | `upstream: 503 …`            | error    |
| the tool reported a failure (MCP isError)| yes     | `error: …`                   | error    |
| may have run before a takeover          | yes      | `outcome unknown: …`         | error    |
| result over the cap                     | no       | `{…, "truncated": true}`     | info     |
| an image over the limits (WithImages)   | no       | `{…, "images_omitted": […]}` | ok       |
| the tool raised (a bug)                 | yes      | `internal error`             | error    |

Calls run in a daemon thread; Python cannot kill a thread, so a call past its deadline is
abandoned (its result dropped). Tools should bound their own I/O.
"""

from __future__ import annotations

import contextvars
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from fnmatch import fnmatchcase
from typing import Any, Literal

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from ..errors import ToolError
from ..messages import JsonObject
from ..vocabulary import ToolSeverity
from .capping import cap_result
from .cursors import CursorError, open_cursor, seal_cursor
from .http_guard import BlockedAddress, ResponseTooLarge
from .registry import Tool, ToolRegistry
from .remote_tasks import RemoteTask, TaskPoll
from .results import (
    Page,
    ProposalRequest,
    ToolContext,
    ToolFailed,
    ToolImage,
    UpstreamError,
    WithImages,
    current_call,
)

log = logging.getLogger(__name__)

ToolErrorKind = Literal[
    "validation",
    "forbidden",
    "input",
    "timeout",
    "upstream",
    "blocked",
    "internal",
    "tool",
    "outcome_unknown",
]
"""Why a call failed (stored with its result as `error_kind`)."""


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """One call's result as the model sees it, and how an operator's UI should colour it."""

    content: str
    is_error: bool
    truncated: bool
    latency_ms: int
    severity: ToolSeverity = ToolSeverity.OK
    error: ToolErrorKind | None = None
    """None on success."""
    effect: ProposalRequest | None = None
    """A proposal to record (propose_action); `content` is then filled in by the caller."""
    images: tuple[str, ...] = ()
    """The result's images, as `data:` URLs (a `WithImages` result), beside `content`."""
    task: RemoteTask | None = None
    """The call answered with a task running on in its server: the result comes when the task
    ends (`ended_outcome`), and `content` is empty until then."""


@dataclass(frozen=True, slots=True)
class Limits:
    """Deadlines and size caps applied to every call (a tool may set tighter ones)."""

    default_timeout_s: float = 30.0
    max_timeout_s: float = 300.0
    progress_after_s: float = 30.0
    output_cap: int = 64 * 1024
    image_max_bytes: int = 5 * 1024 * 1024
    """The largest image a result may pass on (decoded); a larger one is left out."""
    images_per_result: int = 8


class _Refusal(Exception):
    def __init__(
        self,
        content: str,
        *,
        error: ToolErrorKind,
        severity: ToolSeverity = ToolSeverity.WARNING,
    ) -> None:
        super().__init__(content)
        self.content, self.error, self.severity = content, error, severity


def run_call(
    registry: ToolRegistry,
    name: str,
    arguments: Any,
    *,
    ctx: ToolContext,
    allowed: Sequence[str] | None,
    limits: Limits,
    cursor_key: bytes,
    on_progress: Callable[[float], None] | None = None,
) -> ToolOutcome:
    """Run one tool call; never raises for tool problems."""
    started = time.monotonic()
    tool: Tool | None = None
    try:
        tool = _resolve(registry, name, allowed, ctx)
        kwargs, ctx = _arguments(tool, arguments, ctx, cursor_key)
        # The global ceiling caps every tool (a step's lease is sized from it).
        timeout = min(
            tool.timeout_s or limits.default_timeout_s,
            tool.max_timeout_s or limits.max_timeout_s,
            limits.max_timeout_s,
        )
        result, slow = _call(
            tool,
            kwargs,
            ctx,
            timeout=timeout,
            progress_after=limits.progress_after_s,
            on_progress=on_progress,
        )
        images: tuple[str, ...] = ()
        if isinstance(result, WithImages):
            result, images = _images(result, limits)
        outcome = _shape(tool, result, ctx, cursor_key, cap=tool.output_cap or limits.output_cap)
        outcome = replace(outcome, images=images)
        if slow and outcome.severity == ToolSeverity.OK:
            outcome = replace(outcome, severity=ToolSeverity.WARNING)
    except _Refusal as refusal:
        outcome = ToolOutcome(refusal.content, True, False, 0, refusal.severity, refusal.error)
    if tool is not None and tool.severity is not None:
        outcome = replace(outcome, severity=tool.severity)
    return replace(outcome, latency_ms=round((time.monotonic() - started) * 1000))


def tenant_allowed(tool: Tool, *, tenant_id: str, tenant_name: str | None) -> bool:
    """Whether the tenant may call `tool`: its operator-set `allowed_tenants` globs match the
    tenant's name or id (a session's name, which tenants choose, authorizes nothing)."""
    if tool.allowed_tenants is None:
        return True
    names = [n for n in (tenant_name, tenant_id) if n]
    return any(fnmatchcase(n, p) for p in tool.allowed_tenants for n in names)


def _resolve(
    registry: ToolRegistry, name: str, allowed: Sequence[str] | None, ctx: ToolContext
) -> Tool:
    permitted = None if allowed is None else set(registry.expand(allowed))
    available = [n for n in registry.names() if permitted is None or n in permitted]
    tool = registry.get(name) if isinstance(name, str) else None
    if tool is None or tool.name not in available:
        listed = ", ".join(available) or "(none)"
        raise _Refusal(
            f"validation: unknown tool {name!r}; available tools: {listed}", error="validation"
        )
    if not tenant_allowed(tool, tenant_id=ctx.tenant_id, tenant_name=ctx.tenant_name):
        raise _Refusal(f"forbidden: {tool.name} may not be used by this tenant", error="forbidden")
    return tool


def _arguments(
    tool: Tool, arguments: Any, ctx: ToolContext, cursor_key: bytes
) -> tuple[JsonObject, ToolContext]:
    if not isinstance(arguments, Mapping) or not all(isinstance(k, str) for k in arguments):
        raise _Refusal(
            f"validation: arguments for {tool.name} must be a JSON object", error="validation"
        )
    kwargs = dict(arguments)
    error = best_match(Draft202012Validator(tool.offered_parameters()).iter_errors(kwargs))
    if error is not None:
        raise _Refusal(f"validation: {error.message} at {error.json_path}", error="validation")
    if tool.paginated:
        token = kwargs.pop("cursor", None)
        if token is not None:
            try:
                state = open_cursor(
                    token, key=cursor_key, tool=tool.name, session_id=ctx.session_id
                )
            except CursorError as exc:
                raise _Refusal(f"validation: {exc}", error="validation") from None
            ctx = replace(ctx, cursor=state)
    return kwargs, ctx


def _call(
    tool: Tool,
    kwargs: JsonObject,
    ctx: ToolContext,
    *,
    timeout: float,
    progress_after: float,
    on_progress: Callable[[float], None] | None,
) -> tuple[Any, bool]:
    """The tool's return value, and whether it ran past the interim-progress mark."""
    box: dict[str, Any] = {}
    finished = threading.Event()

    def target() -> None:
        try:
            box["result"] = tool.fn(ctx, **kwargs) if tool.takes_context else tool.fn(**kwargs)
        except BaseException as exc:  # reported below, never raised in the worker
            box["error"] = exc
        finally:
            finished.set()

    token = current_call.set(ctx)
    try:
        context = contextvars.copy_context()
    finally:
        current_call.reset(token)
    started = time.monotonic()
    threading.Thread(
        target=lambda: context.run(target), name=f"tool-{tool.name}", daemon=True
    ).start()
    slow = False
    if progress_after < timeout and not finished.wait(progress_after):
        slow = True
        if on_progress is not None:
            on_progress(time.monotonic() - started)
    if not finished.wait(max(0.0, timeout - (time.monotonic() - started))):
        elapsed = _duration(time.monotonic() - started)
        raise _Refusal(
            json.dumps({"error": "tool_timeout", "elapsed": elapsed, "tool": tool.name}),
            error="timeout",
        )
    if "error" in box:
        raise _classify(tool, box["error"])
    return box.get("result"), slow


def _classify(tool: Tool, exc: BaseException) -> _Refusal:
    if isinstance(exc, UpstreamError):
        reason = f" {exc.reason}" if exc.reason else ""
        return _Refusal(
            f"upstream: {exc.status}{reason}", error="upstream", severity=ToolSeverity.ERROR
        )
    if isinstance(exc, ToolFailed):
        return _Refusal(f"error: {exc}", error="tool", severity=ToolSeverity.ERROR)
    if isinstance(exc, ToolError):
        return _Refusal(f"invalid: {exc.message}", error="input")
    if isinstance(exc, BlockedAddress):  # an operator's manifest points somewhere forbidden
        return _Refusal(f"blocked: {exc}", error="blocked", severity=ToolSeverity.ERROR)
    if isinstance(exc, ResponseTooLarge):
        return _Refusal(
            "upstream: response too large", error="upstream", severity=ToolSeverity.ERROR
        )
    if isinstance(exc, ConnectionError):
        return _Refusal("upstream: unreachable", error="upstream", severity=ToolSeverity.ERROR)
    if isinstance(exc, TimeoutError):
        return _Refusal(json.dumps({"error": "tool_timeout", "tool": tool.name}), error="timeout")
    log.error("tool %s raised %s", tool.name, type(exc).__name__, exc_info=exc)
    return _Refusal("internal error", error="internal", severity=ToolSeverity.ERROR)


def _shape(
    tool: Tool, result: Any, ctx: ToolContext, cursor_key: bytes, *, cap: int
) -> ToolOutcome:
    if isinstance(result, ProposalRequest):
        return ToolOutcome("", False, False, 0, effect=result)
    if isinstance(result, RemoteTask):
        return ToolOutcome("", False, False, 0, task=result)
    if isinstance(result, Page):
        data = dict(result.data)
        if result.next is not None:
            data["next_cursor"] = seal_cursor(
                result.next, key=cursor_key, tool=tool.name, session_id=ctx.session_id
            )
        result = data
    try:
        content, truncated = cap_result(result, cap)
    except (TypeError, ValueError) as exc:
        log.error("tool %s returned an unserializable result", tool.name, exc_info=exc)
        raise _Refusal("internal error", error="internal", severity=ToolSeverity.ERROR) from None
    severity = ToolSeverity.INFO if truncated else ToolSeverity.OK
    return ToolOutcome(content, False, truncated, 0, severity)


def ended_outcome(
    registry: ToolRegistry, name: str, ended: TaskPoll, *, limits: Limits, latency_ms: int
) -> ToolOutcome:
    """The outcome of a call whose task has ended (`ended`): its result shaped, capped and
    coloured as `run_call` does a result that comes at once; a failure as an error result."""
    tool = registry.get(name)
    if ended.failure is not None:
        outcome = ToolOutcome(
            f"error: {ended.failure}", True, False, latency_ms, ToolSeverity.ERROR, "tool"
        )
    else:
        result = ended.result
        images: tuple[str, ...] = ()
        if isinstance(result, WithImages):
            result, images = _images(result, limits)
        cap = (tool.output_cap if tool is not None else None) or limits.output_cap
        try:
            content, truncated = cap_result(result, cap)
        except (TypeError, ValueError):
            log.error("the task of %s ended with an unserializable result", name)
            error = ToolSeverity.ERROR
            return ToolOutcome("internal error", True, False, latency_ms, error, "internal")
        severity = ToolSeverity.INFO if truncated else ToolSeverity.OK
        outcome = ToolOutcome(content, False, truncated, latency_ms, severity, images=images)
    if tool is not None and tool.severity is not None:
        outcome = replace(outcome, severity=tool.severity)
    return outcome


def _images(result: WithImages, limits: Limits) -> tuple[Any, tuple[str, ...]]:
    """The value the model reads and the images passed on as `data:` URLs; an image that is
    not one, is too large or is one too many is left out, and the value says so."""
    kept: list[str] = []
    omitted: list[JsonObject] = []
    for image in result.images:
        size = len(image.data) // 4 * 3
        reason = _image_refused(image, size, limits, kept=len(kept))
        if reason is None:
            kept.append(f"data:{image.mime_type};base64,{image.data}")
        else:
            omitted.append({"mime_type": image.mime_type, "reason": reason})
    value = result.value
    if omitted:
        value = {**value, "images_omitted": omitted} if isinstance(value, dict) else value
    return value, tuple(kept)


def _image_refused(image: ToolImage, size: int, limits: Limits, *, kept: int) -> str | None:
    if not image.mime_type.startswith("image/") or not image.data:
        return "not an image"
    if size > limits.image_max_bytes:
        return f"larger than image_max_bytes ({limits.image_max_bytes})"
    if kept >= limits.images_per_result:
        return f"more than images_per_message ({limits.images_per_result})"
    return None


def _duration(seconds: float) -> str:
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes}m{rest}s" if minutes else f"{seconds:.1f}s"


def outcome_unknown(name: str) -> ToolOutcome:
    """The result of a call with side effects that an earlier attempt may already have made
    (its worker stopped before recording the result) and that is not repeated, because the
    tool does not declare itself idempotent by key."""
    return ToolOutcome(
        f"outcome unknown: the call to {name} may or may not have taken effect (the worker "
        "running it stopped before its result was recorded); it was not repeated. Check its "
        "effect before calling it again.",
        True,
        False,
        0,
        ToolSeverity.ERROR,
        "outcome_unknown",
    )
