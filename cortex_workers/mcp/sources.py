"""Discovery: each configured MCP server's tools in a process's tool registry (docs/mcp.md).

`attach` reads every server's tool list once (in parallel, each bounded by its `timeout`),
then again every `refresh_s` (the server's own, else `[mcp] refresh_s`) and whenever a
server says its list changed (on a stdio server's connection, or on the `subscriptions/listen`
stream kept open to an HTTP server). A server
that cannot be reached has no tools in the registry, and its reason is reported by
GET /v1/tools; a session that enabled its tools goes on without them. With no server
configured nothing is started.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from ..mcp_settings import McpSettings
from ..messages import JsonObject
from ..tools.loading import Rejected
from ..tools.registry import ToolRegistry
from ..tools.remote_tasks import TaskPoll
from .adapter import CONFIRMED_ACTION, McpToolCall, adapt, poll_of
from .connection import McpLoop, McpServer

log = logging.getLogger(__name__)


class McpSources:
    """The configured servers of one process, and which of them are unavailable (and why)."""

    def __init__(self, settings: McpSettings, registry: ToolRegistry) -> None:
        loop = McpLoop()
        self.settings, self._registry = settings, registry
        self.servers = {
            name: McpServer(name, config, loop) for name, config in settings.servers.items()
        }
        self.unavailable: dict[str, str] = {}
        self._last_seen: dict[str, list[str]] = {}
        self._stop = threading.Event()
        for server in self.servers.values():
            server.on_tools_changed = lambda name=server.name: self.refresh(name)

    def refresh(self, name: str) -> None:
        """Read server `name`'s tool list again and put its tools in the registry."""
        server = self.servers[name]
        try:
            tools = adapt(server, server.list_tools())
        except Exception as exc:  # a server that is down must not stop the process
            if self._stop.is_set() or "shutdown" in str(exc):  # the process is ending
                return
            reason = _reason(exc)
            if self.unavailable.get(name) != reason:
                log.warning("MCP server %s unavailable: %s", name, reason)
            self.unavailable[name] = reason
            self._registry.replace_server(name, [])
            return
        self._last_seen[name] = [t.name for t in tools]
        for refused in self._registry.replace_server(name, tools):
            log.warning("MCP server %s: a tool was not registered: %s", name, refused)
        if self.unavailable.pop(name, None) is not None:
            log.info("MCP server %s available again (%d tools)", name, len(tools))

    def refresh_all(self, names: list[str] | None = None) -> None:
        """Read the tool lists of `names` (all servers when None) again, in parallel."""
        names = list(self.servers) if names is None else names
        if not names:
            return
        try:
            with ThreadPoolExecutor(max_workers=min(8, len(names))) as pool:
                list(pool.map(self.refresh, names))
        except RuntimeError:  # the interpreter is shutting down
            self._stop.set()

    def _interval(self, name: str) -> float:
        own = self.servers[name].config.refresh_s
        return self.settings.refresh_s if own is None else own

    def unavailable_tools(self) -> set[str]:
        """The names of the tools last seen on the servers that are down now."""
        return {n for server in self.unavailable for n in self._last_seen.get(server, ())}

    def owns(self, name: str) -> bool:
        """Whether `name` is (or would be) a tool of a configured server: a session naming it
        goes on without it while that server is down."""
        return any(
            name.startswith(f"{n}_" if c.tool_prefix is None else c.tool_prefix)
            for n, c in self.settings.servers.items()
        )

    def rejected(self) -> list[Rejected]:
        """The unavailable servers, for GET /v1/tools (a reason that quotes a server's URL
        says "its url": where it is is the operator's to know)."""
        out = []
        for name, reason in sorted(self.unavailable.items()):
            url = self.settings.servers[name].url if name in self.settings.servers else None
            shown = reason.replace(url, "its url") if url else reason
            out.append(Rejected(f"mcp {name}", None, f"MCP server unavailable: {shown}"))
        return out

    def execute(self, action: str, arguments: JsonObject, *, key: str) -> Any:
        """Run a confirmed proposal's MCP call (`action` is `mcp:<server>:<tool>`)."""
        server, _, tool = action.removeprefix(CONFIRMED_ACTION).partition(":")
        if server not in self.servers:
            raise LookupError(f"MCP server {server!r} is not configured")
        return McpToolCall(self.servers[server], tool, confirm=False).send(arguments, key=key)

    def poll_task(self, server: str, task_id: str) -> TaskPoll:
        """One `tasks/get` of a task `server` answered a call with. A server that is not
        configured any more, or that no longer knows the task, ends it as a failure; a server
        that does not answer raises ConnectionError or TimeoutError (look again later)."""
        if server not in self.servers:
            return TaskPoll(working=False, failure=f"the MCP server {server} is not configured")
        try:
            return poll_of(self.servers[server].get_task(task_id))
        except MCPError as exc:
            if exc.code == INVALID_PARAMS:  # unknown or expired: it will not come back
                return TaskPoll(working=False, failure=f"the task is gone from {server}: {exc}")
            raise ConnectionError(f"tasks/get on {server}: {exc}") from None

    def cancel_task(self, server: str, task_id: str) -> None:
        """`tasks/cancel`, best effort: a failure is logged, never raised."""
        if server not in self.servers:
            return
        try:
            self.servers[server].cancel_task(task_id)
        except Exception as exc:
            log.info("MCP server %s: tasks/cancel of %s failed: %s", server, task_id, _reason(exc))

    def _refresher(self) -> None:
        """Each server read again when its interval has passed since its last reading."""
        tick = min(self._interval(n) for n in self.servers)
        due = {n: time.monotonic() + self._interval(n) for n in self.servers}
        while not self._stop.wait(tick):
            now = time.monotonic()
            names = [n for n, at in due.items() if at <= now]
            self.refresh_all(names)
            due.update({n: time.monotonic() + self._interval(n) for n in names})

    def start(self) -> McpSources:
        self.refresh_all()
        for server in self.servers.values():
            server.watch(self._stop)
        threading.Thread(target=self._refresher, name="mcp-refresh", daemon=True).start()
        return self

    def stop(self) -> None:
        self._stop.set()


def attach(settings: McpSettings, registry: ToolRegistry) -> McpSources:
    """Discover the configured servers' tools into `registry`, and keep them fresh."""
    return McpSources(settings, registry).start()


def _reason(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _reason(exc.exceptions[0])
    if isinstance(exc, TimeoutError):
        return "no answer in time"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
