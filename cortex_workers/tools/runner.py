"""Run one tool call safely: resolve, validate, call with a deadline, serialize, cap.

Timeouts: the call runs in a fresh daemon thread and the caller waits at most the
deadline. Python cannot kill a thread, so a call that times out is *abandoned*: it
keeps running in the background until it returns on its own (its result is then
dropped). Being a daemon thread, it never blocks interpreter exit. Tools should
therefore be bounded themselves (e.g. pass timeouts to the I/O they do).
"""

from __future__ import annotations

import contextvars
import json
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from cortex_workers.tools.registry import Tool, ToolRegistry


@dataclass(frozen=True)
class ToolOutcome:
    """The result of one tool call as shown to the model."""

    content: str
    is_error: bool
    truncated: bool
    latency_ms: int


class _Failure(Exception):
    """Internal: a tool problem whose message goes to the model as an error result."""


def run_tool(
    registry: ToolRegistry,
    name: str,
    arguments: Any,
    *,
    allowed: Sequence[str] | None,
    timeout_s: float,
    output_cap: int,
) -> ToolOutcome:
    """Call tool `name` with `arguments` and return what the model should see.

    Never raises for tool problems (unknown or disallowed tool, bad arguments, the
    tool raising or timing out, an unserializable result): those come back with
    `is_error=True` and a message the model can act on. `allowed` of None allows
    every registered tool. `timeout_s` applies unless the tool sets its own.
    Content longer than `output_cap` UTF-8 bytes is cut on a character boundary
    and flagged `truncated`. ValueError only for a non-positive `timeout_s` or a
    negative `output_cap` (caller bugs).
    """
    if not timeout_s > 0:
        raise ValueError(f"timeout_s must be positive, got {timeout_s}")
    if output_cap < 0:
        raise ValueError(f"output_cap must be >= 0, got {output_cap}")
    started = time.monotonic()
    try:
        content, is_error = _run(registry, name, arguments, allowed, timeout_s), False
    except _Failure as failure:
        content, is_error = str(failure), True
    content, truncated = _cap(content, output_cap)
    latency_ms = round((time.monotonic() - started) * 1000)
    return ToolOutcome(
        content=content, is_error=is_error, truncated=truncated, latency_ms=latency_ms
    )


def _run(
    registry: ToolRegistry,
    name: str,
    arguments: Any,
    allowed: Sequence[str] | None,
    timeout_s: float,
) -> str:
    tool = _resolve(registry, name, allowed)
    kwargs = _validate(tool, arguments)
    deadline = tool.timeout_s if tool.timeout_s is not None else timeout_s
    result = _call_with_deadline(tool, kwargs, deadline)
    return _serialize(name, result)


def _resolve(registry: ToolRegistry, name: str, allowed: Sequence[str] | None) -> Tool:
    available = [n for n in registry.names() if allowed is None or n in allowed]
    tool = registry.get(name) if isinstance(name, str) else None
    if tool is None or tool.name not in available:
        listed = ", ".join(available) if available else "(none)"
        raise _Failure(f"unknown tool {name!r}; available tools: {listed}")
    return tool


def _validate(tool: Tool, arguments: Any) -> dict[str, Any]:
    if not isinstance(arguments, Mapping):
        raise _Failure(
            f"invalid arguments for {tool.name}: expected a JSON object, "
            f"got {type(arguments).__name__}"
        )
    if not all(isinstance(key, str) for key in arguments):
        raise _Failure(f"invalid arguments for {tool.name}: argument names must be strings")
    kwargs = dict(arguments)
    try:
        error = best_match(Draft202012Validator(tool.parameters).iter_errors(kwargs))
    except Exception as exc:  # e.g. an unresolvable $ref in the tool's own schema
        raise _Failure(
            f"{tool.name} failed: cannot validate arguments: {type(exc).__name__}: {exc}"
        ) from exc
    if error is not None:
        raise _Failure(f"invalid arguments for {tool.name}: {error.message} at {error.json_path}")
    return kwargs


def _call_with_deadline(tool: Tool, kwargs: dict[str, Any], deadline: float) -> Any:
    box: dict[str, Any] = {}
    finished = threading.Event()

    def target() -> None:
        try:
            box["result"] = tool.fn(**kwargs)
        except BaseException as exc:  # any tool failure is reported, not raised
            box["error"] = exc
        finally:
            finished.set()

    context = contextvars.copy_context()  # the tool sees the caller's context vars

    def run() -> None:
        context.run(target)

    thread = threading.Thread(target=run, name=f"tool-{tool.name}", daemon=True)
    thread.start()
    if not finished.wait(deadline):
        raise _Failure(f"{tool.name} timed out after {deadline:g}s")
    if "error" in box:
        exc = box["error"]
        raise _Failure(f"{tool.name} failed: {type(exc).__name__}: {exc}")
    return box.get("result")


def _serialize(name: str, result: Any) -> str:
    if isinstance(result, str):
        return result
    try:
        return json.dumps(result, ensure_ascii=False, default=str)
    except Exception as exc:  # e.g. circular references, odd keys
        raise _Failure(
            f"{name} returned a result that cannot be serialized: {type(exc).__name__}: {exc}"
        ) from exc


def _cap(content: str, cap: int) -> tuple[str, bool]:
    """Cut `content` to at most `cap` UTF-8 bytes on a character boundary."""
    try:
        encoded = content.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: replace them so the content is valid
        encoded = content.encode("utf-8", errors="replace")
        content = encoded.decode("utf-8")
    if len(encoded) <= cap:
        return content, False
    cut = cap
    while cut > 0 and (encoded[cut] & 0xC0) == 0x80:  # step back off continuation bytes
        cut -= 1
    return encoded[:cut].decode("utf-8"), True
