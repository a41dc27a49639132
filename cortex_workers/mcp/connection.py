"""Talking to one MCP server with the official SDK (`mcp.Client`).

Every process has one event loop thread for MCP (`McpLoop`); tool calls, which run in the
tools worker's threads, wait on it. A streamable HTTP server gets a new client per request
(the protocol is stateless; the SSRF guard checks its host each time). A stdio server is one
process per worker process, kept open and started again when it dies.

A server's `notifications/tools/list_changed` calls `on_tools_changed`: a stdio server sends
it on its open connection; a streamable HTTP server (protocol 2026-07-28) on the
`subscriptions/listen` stream `watch` keeps open, opened again when it drops. An HTTP server
that speaks an older version, or does not notify, is read on the schedule only.

A tool call of an HTTP server declares the Tasks extension (`mcp.tasks`): the server may answer
with a task handle, and `get_task` and `cancel_task` reach the task later, from any process. A
stdio server is not offered tasks: its process belongs to one worker process, and a task's
polls may run in another.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar
from urllib.parse import urlsplit

from mcp import Client, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ListenNotSupportedError
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ToolsListChanged
from mcp_types import CallToolResult, Tool
from pydantic import ValidationError

from ..mcp_settings import McpServerSettings
from ..messages import JsonObject
from ..tools.http_guard import BlockedAddress, resolve_checked
from ..tools.results import ToolFailed
from .tasks import TaskDoc, TaskHandle, Tasks, TaskStarted, cancel_task, get_task

T = TypeVar("T")
log = logging.getLogger(__name__)
WATCH_RETRY_S = 5.0
"""How soon a dropped (or refused) `subscriptions/listen` stream is opened again."""


class McpLoop:
    """An asyncio loop in a daemon thread: where every MCP client of the process runs."""

    def __init__(self) -> None:
        logging.getLogger("httpx2").setLevel(logging.WARNING)  # a line per request otherwise
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="mcp", daemon=True)
        self._thread.start()

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run `coro` on the loop in the background (until it returns or the process ends)."""
        asyncio.run_coroutine_threadsafe(coro, self._loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        """Run `coro` on the loop; TimeoutError after `timeout` seconds (it is cancelled)."""
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise


class McpServer:
    """One configured server: list its tools, call one."""

    def __init__(self, name: str, config: McpServerSettings, loop: McpLoop) -> None:
        self.name, self.config, self._loop = name, config, loop
        self._stdio: _StdioHolder | None = None
        self._lock = threading.Lock()
        self.on_tools_changed: Callable[[], None] | None = None
        self._watching = False

    def watch(self, stopped: threading.Event) -> None:
        """For an HTTP server: keep a `subscriptions/listen` stream of its tool list changes
        open (each change calls `on_tools_changed`), until `stopped` is set."""
        if self.config.url is not None and not self._watching:
            self._watching = True
            self._loop.spawn(self._watch(stopped))

    async def _watch(self, stopped: threading.Event) -> None:
        while not stopped.is_set():
            listening = asyncio.ensure_future(self._http(self._listen))
            while not listening.done():  # closed when the process's sources are replaced
                await asyncio.wait({listening}, timeout=1.0)
                if stopped.is_set():
                    listening.cancel()
            try:
                if not await listening:
                    return  # the server does not notify: the schedule reads it
            except asyncio.CancelledError:
                return
            except ListenNotSupportedError:
                log.info("MCP server %s: no subscriptions/listen, read on schedule", self.name)
                return
            except Exception as exc:  # down, refused, dropped: listen again a little later
                log.debug("MCP server %s: listen stream ended: %s", self.name, _reason(exc))
            await asyncio.sleep(WATCH_RETRY_S)

    async def _listen(self, client: Client) -> bool:
        """Follow the stream until it ends; False when the server will not send the change."""
        async with client.listen(tools_list_changed=True) as events:
            if not events.honored.tools_list_changed:
                return False
            async for event in events:
                if isinstance(event, ToolsListChanged) and self.on_tools_changed is not None:
                    await asyncio.to_thread(self.on_tools_changed)
        return True

    def list_tools(self) -> list[Tool]:
        """Every tool the server lists (all pages)."""
        return self._loop.run(self._with_client(_list_all), self.config.timeout)

    def call_tool(
        self,
        name: str,
        arguments: JsonObject,
        *,
        meta: dict[str, str],
        timeout: float,
        tasks: bool = False,
    ) -> CallToolResult | TaskHandle:
        """One `tools/call`; transport failures raise ConnectionError or TimeoutError. With
        `tasks`, an HTTP server is offered the Tasks extension and may answer with a task."""

        async def call(client: Client) -> CallToolResult | TaskHandle:
            try:
                return await client.call_tool(
                    name,
                    arguments,
                    read_timeout_seconds=timeout,
                    meta=meta,  # type: ignore[arg-type]
                )
            except TaskStarted as started:
                return started.handle
            except ValidationError as exc:  # the server's answer, not ours to trust
                problem = f"the MCP server answered with an invalid result ({_first(exc)})"
                raise ToolFailed(problem) from None

        return self._loop.run(self._with_client(call, tasks=tasks), timeout + 1)

    def get_task(self, task_id: str) -> TaskDoc:
        """`tasks/get` of a task this server answered a call with."""

        async def get(client: Client) -> TaskDoc:
            return await get_task(client, task_id)

        return self._loop.run(self._with_client(get, tasks=True), self.config.timeout)

    def cancel_task(self, task_id: str) -> None:
        """`tasks/cancel` of a task this server answered a call with."""

        async def cancel(client: Client) -> None:
            await cancel_task(client, task_id)

        self._loop.run(self._with_client(cancel, tasks=True), self.config.timeout)

    async def _with_client(
        self, use: Callable[[Client], Awaitable[T]], *, tasks: bool = False
    ) -> T:
        try:
            if self.config.command is not None:
                client = await self._stdio_client()
                try:
                    return await use(client)
                except Exception:
                    await self._drop_stdio()  # restarted by the next call
                    raise
            return await self._http(use, tasks=tasks)
        except (ConnectionError, TimeoutError, asyncio.CancelledError):
            raise
        except Exception as exc:
            if _is_transport(exc):
                raise ConnectionError(
                    f"MCP server {self.name} unreachable: {_reason(exc)}"
                ) from exc
            answered = _error_answer(exc)
            if answered is not None:  # the server's error, out of the transport's task group
                raise answered from None
            raise

    async def _http(self, use: Callable[[Client], Awaitable[T]], *, tasks: bool = False) -> T:
        url = self.config.url
        assert url is not None
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        host = parts.hostname or ""
        try:
            await asyncio.to_thread(
                resolve_checked, host, port, allow_private=self.config.allow_private
            )
        except BlockedAddress as exc:  # where it points is the operator's to know: not named
            hint = f"set allow_private = true in [mcp.servers.{self.name}] to permit it"
            raise ConnectionError(
                f"refusing to connect: its host resolves to an address that is not allowed "
                f"({exc.reason}); {hint}"
            ) from None
        headers = {k: v.get_secret_value() for k, v in self.config.headers.items()}
        async with create_mcp_http_client(headers=headers) as http:
            transport = streamable_http_client(url, http_client=http)
            extensions = [Tasks()] if tasks else None
            async with Client(transport, cache=None, extensions=extensions) as client:
                return await use(client)

    async def _stdio_client(self) -> Client:
        holder = self._stdio
        if holder is None or holder.dead:
            holder = self._stdio = _StdioHolder(self, self.config)
            await holder.start()
        return holder.client

    async def _drop_stdio(self) -> None:
        holder, self._stdio = self._stdio, None
        if holder is not None:
            await holder.stop()


class _StdioHolder:
    """A stdio server's process and session, held open by a task of the loop."""

    def __init__(self, server: McpServer, config: McpServerSettings) -> None:
        assert config.command is not None
        self._server = server
        self._params = StdioServerParameters(
            command=config.command, args=list(config.args), env=config.env or None
        )
        self._ready = asyncio.Event()
        self._closing = asyncio.Event()
        self._client: Client | None = None
        self._error: BaseException | None = None
        self._task: asyncio.Task[None] | None = None
        self._timeout = config.timeout

    @property
    def dead(self) -> bool:
        return self._task is None or self._task.done()

    @property
    def client(self) -> Client:
        assert self._client is not None
        return self._client

    async def start(self) -> None:
        self._task = asyncio.create_task(self._hold())
        await asyncio.wait_for(self._ready.wait(), self._timeout)
        if self._client is None:
            raise ConnectionError(f"MCP server {self._server.name} did not start: {self._error}")

    async def stop(self) -> None:
        self._closing.set()
        if self._task is not None:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(self._task, 5)

    async def _hold(self) -> None:
        try:
            # the process's own stderr: a worker's sys.stderr is a logging proxy with no fd
            errlog = sys.__stderr__ or open(os.devnull, "w")  # noqa: SIM115
            transport = stdio_client(self._params, errlog=errlog)
            async with Client(transport, cache=None, message_handler=self._on_message) as client:
                self._client = client
                self._ready.set()
                await self._closing.wait()
        except BaseException as exc:  # the process died or never started
            self._error = exc
            log.warning("MCP server %s (stdio) stopped: %s", self._server.name, _reason(exc))
        finally:
            self._client = None
            self._ready.set()

    async def _on_message(self, message: Any) -> None:
        method = getattr(getattr(message, "root", message), "method", None)
        if method == "notifications/tools/list_changed" and self._server.on_tools_changed:
            await asyncio.to_thread(self._server.on_tools_changed)


async def _list_all(client: Client) -> list[Tool]:
    tools: list[Tool] = []
    cursor: str | None = None
    for _ in range(100):  # a paginator that never ends cannot hang discovery
        page = await client.list_tools(cursor=cursor)
        tools += page.tools
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def _is_transport(exc: BaseException) -> bool:
    if isinstance(exc, BaseExceptionGroup):
        return any(_is_transport(e) for e in exc.exceptions)
    names = {c.__name__ for c in type(exc).__mro__}
    return bool(
        names
        & {
            "ConnectError",
            "ConnectTimeout",
            "ReadError",
            "RemoteProtocolError",
            "TransportError",
            "ClosedResourceError",
            "BrokenResourceError",
            "EndOfStream",
            "OSError",
        }
    )


def _first(exc: ValidationError) -> str:
    """Where the first problem of a validation is, and what it is."""
    for problem in exc.errors():
        return f"{'.'.join(str(p) for p in problem['loc'])}: {problem['msg']}"
    return "invalid"


def _error_answer(exc: BaseException) -> MCPError | ToolFailed | None:
    """The server's JSON-RPC error answer in `exc`, or its invalid answer (raised as is, or in
    exception groups)."""
    if isinstance(exc, MCPError | ToolFailed):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            if (found := _error_answer(inner)) is not None:
                return found
    return None


def _reason(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _reason(exc.exceptions[0])
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
