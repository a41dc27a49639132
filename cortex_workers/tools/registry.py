"""Tool definitions and the registry the model's tool calls are resolved against."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from cortex_workers.messages import ToolSpec
from cortex_workers.vocabulary import ToolSeverity

from ..messages import JsonObject

F = TypeVar("F", bound=Callable[..., Any])

_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
"""Tool names every provider accepts (OpenAI and Anthropic share this rule)."""


@dataclass(frozen=True)
class Tool:
    """A callable the model may use.

    `parameters` is a JSON Schema (Draft 2020-12) object schema for the arguments;
    `fn` is called with the validated arguments as keyword arguments. `timeout_s`
    of None means the caller's default applies. `read_only` tells the caller the
    tool has no side effects (so a retried step may safely call it again).
    """

    name: str
    description: str
    parameters: JsonObject
    fn: Callable[..., Any]
    timeout_s: float | None = None
    read_only: bool = True
    max_timeout_s: float | None = None
    """Hard ceiling: past it the call is abandoned with a `tool_timeout` error (None: 5 min)."""
    output_cap: int | None = None
    """Bytes of serialized result (None: the configured cap, 64 KiB)."""
    paginated: bool = False
    """Returns `Page`s; the router adds a `cursor` argument and signs `next_cursor`."""
    allowed_tenants: tuple[str, ...] | None = None
    """Glob patterns over the tenant names (or ids) that may call it (None: every tenant).
    Set by the operator; never shown to tenants."""
    takes_context: bool = False
    """`fn(ctx, **arguments)` with a `ToolContext` instead of `fn(**arguments)`."""
    source: str = "builtin"
    """Where it came from: builtin, module, entry_point, plugin or mcp:<server> (GET /v1/tools)."""
    idempotent: bool = False
    """The receiver recognises a repeated idempotency key, so a takeover may send the call
    again with the same key (otherwise a call that may have happened ends "outcome unknown")."""
    severity: ToolSeverity | None = None
    """How a UI colours this tool's results, whatever they are (None: by the outcome)."""
    server: str | None = None
    """The MCP server it was discovered on (a session enables them all with `<server>.*`)."""

    @property
    def has_effects(self) -> bool:
        """Whether a call changes something outside our database, so it is recorded as an
        intent before it is sent (built-in tools keep their effects in our own statements)."""
        return not self.read_only and self.source != "builtin"

    def spec(self) -> ToolSpec:
        """The tool as offered to the model (a paginated tool also takes `cursor`)."""
        return ToolSpec(
            name=self.name, description=self.description, parameters=self.offered_parameters()
        )

    def offered_parameters(self) -> JsonObject:
        if not self.paginated:
            return self.parameters
        properties = self.parameters.get("properties", {})
        props = dict(properties) if isinstance(properties, dict) else {}  # a checked schema's
        props["cursor"] = {
            "type": "string",
            "description": (
                "Opaque next_cursor returned by the previous call; omit it for the first page."
            ),
        }
        return {**self.parameters, "properties": props}


def _check_tool(tool: Tool) -> None:
    if not isinstance(tool.name, str) or not _NAME_RE.fullmatch(tool.name):
        raise ValueError(f"tool name {tool.name!r} must match {_NAME_RE.pattern}")
    if not callable(tool.fn):
        raise ValueError(f"tool {tool.name!r}: fn is not callable")
    if tool.timeout_s is not None and not tool.timeout_s > 0:
        raise ValueError(f"tool {tool.name!r}: timeout_s must be positive, got {tool.timeout_s}")
    if not isinstance(tool.parameters, dict) or tool.parameters.get("type") != "object":
        raise ValueError(f"tool {tool.name!r}: parameters must be a JSON Schema with type 'object'")
    try:
        Draft202012Validator.check_schema(tool.parameters)
    except SchemaError as exc:
        raise ValueError(
            f"tool {tool.name!r} has an invalid parameters schema: {exc.message}"
        ) from exc


class ToolRegistry:
    """Tools by name. Registration is checked; lookups are cheap and thread-safe."""

    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}
        self._lock = threading.Lock()

    def register(self, tool: Tool) -> None:
        """Add `tool`; ValueError if its name is taken or its definition is invalid."""
        _check_tool(tool)
        with self._lock:
            if tool.name in self._tools:
                raise ValueError(f"tool {tool.name!r} is already registered")
            self._tools[tool.name] = tool

    def replace_server(self, server: str, tools: Sequence[Tool]) -> list[str]:
        """Make `tools` the tools of MCP server `server` (none: it is unavailable); returns the
        names that could not be registered, with the reason."""
        refused: list[str] = []
        with self._lock:
            kept = {n: t for n, t in self._tools.items() if t.server != server}
            for t in tools:
                try:
                    _check_tool(t)
                except ValueError as exc:
                    refused.append(str(exc))
                    continue
                if t.name in kept:
                    refused.append(f"tool {t.name!r} is already registered")
                    continue
                kept[t.name] = t
            self._tools = kept
        return refused

    def expand(self, names: Sequence[str]) -> list[str]:
        """`names` with each `<server>.*` replaced by that MCP server's current tools."""
        out: list[str] = []
        for n in names:
            if n.endswith(".*"):
                server = n[:-2]
                out += [t.name for t in self.all() if t.server == server and t.name not in out]
            elif n not in out:
                out.append(n)
        return out

    def all(self) -> list[Tool]:
        """Every registered tool, by name."""
        tools = self._tools
        return [tools[n] for n in sorted(tools)]

    def get(self, name: str) -> Tool | None:
        """The tool called `name`, or None."""
        return self._tools.get(name)

    def names(self) -> list[str]:
        """All registered tool names, sorted."""
        return sorted(self._tools)

    def specs(self, names: Sequence[str] | None = None) -> list[ToolSpec]:
        """Specs of the named tools in the order given (None: all, sorted by name).

        Raises ValueError naming any unknown tools.
        """
        wanted = self.names() if names is None else list(names)
        unknown = [n for n in wanted if n not in self._tools]
        if unknown:
            raise ValueError(
                f"unknown tool(s): {', '.join(unknown)}; available: {', '.join(self.names())}"
            )
        return [self._tools[n].spec() for n in wanted]

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)


def tool(
    name: str,
    *,
    description: str,
    parameters: JsonObject,
    registry: ToolRegistry | None = None,
    **options: Any,
) -> Callable[[F], F]:
    """Decorator: register the function as tool `name` and return it unchanged.

    Registers into `registry`, or into `default_registry()` when None; `options` are the other
    `Tool` fields (timeout_s, max_timeout_s, paginated, takes_context, read_only, ...).
    """

    def decorate(fn: F) -> F:
        target = registry if registry is not None else default_registry()
        target.register(
            Tool(name=name, description=description, parameters=parameters, fn=fn, **options)
        )
        return fn

    return decorate


_default: ToolRegistry | None = None
_default_lock = threading.Lock()


def default_registry() -> ToolRegistry:
    """The process-wide registry, created on first call with the built-in tools in it."""
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                from cortex_workers.tools.builtin import register_builtins

                registry = ToolRegistry()
                register_builtins(registry)
                _default = registry
    return _default
