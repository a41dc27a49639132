"""`/mcp`: cortex-workers as an MCP server (docs/mcp.md), a thin adapter over the routes'
domain functions, built with the official `mcp` SDK (the `mcp` extra).

Stateless streamable HTTP: no MCP session is kept, so any API replica answers any request.
The caller's API key is the bearer token, as on every route. Tools:

- `list_sessions`: the tenant's sessions, newest first;
- `ask`: start a turn (in the session named, or a new one) and return its answer once it is
  done, or its id and status when it is not done within `wait_s` (the turn goes on; its
  state is in Postgres, so any replica can be asked about it with `turn_status`);
- `turn_status`: a turn's status and answer;
- `<name>_agent` for each configured agent card (GET /v1/agents), with the card's input
  schema: a call runs the agent in a session of its own, as a turn whose steps call the
  agent's tool and answer with its result (`turns.options.AgentCall`), so the agent runs on
  the workers as it does for a session's model; the answer comes back as `ask`'s does.

A client that declares the Tasks extension gets a task instead of a turn still going on
(`mcp_tasks`).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from typing import Any

import jsonschema
from fastapi import FastAPI, HTTPException
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import Tool as McpTool
from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse
from starlette.routing import Route

from ..agents import AgentCard
from ..agents.registry import tool_description
from ..dispatch import publish
from ..errors import CortexError
from ..messages import JsonObject
from ..runtime import Runtime, get_runtime
from ..store import repo
from ..store.db import transaction
from ..turns import sessions
from ..turns.agents.calls import ONE_CALL
from ..turns.options import AgentCall, TurnOptions
from ..turns.submit import submit_turn
from ..vocabulary import TurnStatus
from .deps import tenant_of_key
from .mcp_tasks import TASK_AFTER_S, TurnAnswer, TurnTasks, declares_tasks, tool_result
from .schemas import SessionCreate
from .views import require_turn, turn_out

ENDED = {TurnStatus.DONE, TurnStatus.FAILED, TurnStatus.CANCELLED}
MAX_WAIT_S = 120.0
Scope = MutableMapping[str, Any]
Asgi = Callable[[Scope, Any, Any], Awaitable[None]]


async def _tenant(ctx: Context) -> uuid.UUID:
    headers = ctx.headers or {}
    scheme, _, key = (headers.get("authorization") or "").partition(" ")
    try:
        return await tenant_of_key(get_runtime(), key.strip())
    except HTTPException as exc:
        raise ToolError(f"unauthorized: {exc.detail}") from None


def _sessions(rt: Runtime, tenant_id: uuid.UUID, limit: int) -> list[dict[str, Any]]:
    with transaction(rt.db) as db:
        rows = repo.recent_sessions(db, tenant_id, limit=max(1, min(limit, 200)), before=None)
        return [
            {"id": str(s.id), "name": s.name, "created_at": s.created_at.isoformat()}
            for s, _ in rows
        ]


def _status(rt: Runtime, tenant_id: uuid.UUID, turn_id: uuid.UUID) -> TurnAnswer:
    with transaction(rt.db) as db:
        out = turn_out(db, require_turn(db, turn_id, tenant_id))
    return TurnAnswer(
        turn_id=str(out.id),
        session_id=str(out.session_id),
        status=str(out.status),
        answer=out.answer,
        error=out.error,
    )


def _start(rt: Runtime, tenant_id: uuid.UUID, session_id: str | None, content: str) -> uuid.UUID:
    if session_id is None:
        sid = sessions.create_session(rt, tenant_id, SessionCreate(name="mcp").spec()).id
    else:
        try:
            sid = uuid.UUID(session_id)
        except ValueError:
            raise ToolError(f"session_id {session_id!r} is not a session id") from None
    result = submit_turn(rt, tenant_id=tenant_id, session_id=sid, content=content)
    publish(result.publish)
    return result.turn.id


def _start_agent(
    rt: Runtime, tenant_id: uuid.UUID, card: AgentCard, arguments: JsonObject
) -> uuid.UUID:
    """A session of its own that offers the agent, and the turn that calls it."""
    spec = SessionCreate(
        name=f"mcp/{card.name}", tools=[], agents=[card.name], metadata={ONE_CALL: card.name}
    ).spec()
    sid = sessions.create_session(rt, tenant_id, spec).id
    task = arguments.get("task")
    content = (
        task if set(arguments) == {"task"} and isinstance(task, str) else json.dumps(arguments)
    )
    options = TurnOptions(agent_call=AgentCall(agent=card.name, arguments=arguments))
    result = submit_turn(
        rt, tenant_id=tenant_id, session_id=sid, content=content, options=options.stored()
    )
    publish(result.publish)
    return result.turn.id


async def _until_ended(
    rt: Runtime, tenant_id: uuid.UUID, turn_id: uuid.UUID, wait_s: float
) -> TurnAnswer:
    """The turn once it has ended, or as it is after `wait_s` seconds (at most MAX_WAIT_S)."""
    deadline = time.monotonic() + max(0.0, min(wait_s, MAX_WAIT_S))
    while True:
        status = await run_in_threadpool(_status, rt, tenant_id, turn_id)
        if status["status"] in ENDED or time.monotonic() >= deadline:
            return status
        await asyncio.sleep(0.2)


def _agent_tool(card: AgentCard) -> McpTool:
    return McpTool(
        name=f"{card.name}_agent",
        title=card.name,
        description=tool_description(card),
        input_schema=card.input_schema,
    )


class _CortexMcp(MCPServer):
    """Our tools, then each configured agent card as `<name>_agent`, read from the runtime at
    each request (the cards read again on SIGHUP show at once)."""

    async def list_tools(self) -> list[McpTool]:
        cards = get_runtime().agents
        return [*await super().list_tools(), *(_agent_tool(cards.cards[n]) for n in cards.names())]

    async def call_tool(
        self, name: str, arguments: JsonObject, context: Context[Any, Any] | None = None
    ) -> Any:
        card = get_runtime().agents.by_tool(name)
        if card is None or context is None:
            return await super().call_tool(name, arguments, context)
        return tool_result(await _call_agent(card, arguments, context), agent=True)


async def _call_agent(card: AgentCard, arguments: JsonObject, ctx: Context) -> TurnAnswer:
    """Run `card`'s agent for the caller: its answer once done, else its turn to poll."""
    tenant_id = await _tenant(ctx)
    try:
        jsonschema.validate(arguments, card.input_schema)
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path)
        raise ToolError(
            f"invalid arguments for {card.name}_agent{f' at {where}' if where else ''}: "
            f"{exc.message}"
        ) from None
    rt = get_runtime()
    try:
        turn_id = await run_in_threadpool(_start_agent, rt, tenant_id, card, arguments)
    except CortexError as exc:  # the default provider unavailable, say
        raise ToolError(f"{exc.code}: {exc.message}") from None
    wait_s = TASK_AFTER_S if declares_tasks(ctx) else min(card.timeout_s + 5, 60.0)
    return await _until_ended(rt, tenant_id, turn_id, wait_s)


def _is_agent_tool(name: str) -> bool:
    return get_runtime().agents.by_tool(name) is not None


def build_server() -> MCPServer:
    """The MCP server `/mcp` serves."""
    server: MCPServer = _CortexMcp(
        "cortex-workers",
        instructions="Durable LLM conversations: ask, and read answers.",
        extensions=[TurnTasks(("ask",), _is_agent_tool)],
    )

    @server.tool(description="The caller's sessions, newest first.")
    async def list_sessions(ctx: Context, limit: int = 20) -> dict[str, Any]:
        tenant_id = await _tenant(ctx)
        return {"sessions": await run_in_threadpool(_sessions, get_runtime(), tenant_id, limit)}

    @server.tool(
        description=(
            "Ask a question: a turn in the session named (or a new session) that runs in the "
            "background. Returns the answer when the turn is done within wait_s seconds, else "
            "its turn_id and status (ask turn_status later), or a task (tasks/get) to a client "
            "that declares the Tasks extension."
        )
    )
    async def ask(
        content: str, ctx: Context, session_id: str | None = None, wait_s: float = 60.0
    ) -> TurnAnswer:
        tenant_id = await _tenant(ctx)
        rt = get_runtime()
        turn_id = await run_in_threadpool(_start, rt, tenant_id, session_id, content)
        return await _until_ended(rt, tenant_id, turn_id, wait_s)

    @server.tool(description="A turn's status, and its answer once it is done.")
    async def turn_status(turn_id: str, ctx: Context) -> TurnAnswer:
        tenant_id = await _tenant(ctx)
        try:
            tid = uuid.UUID(turn_id)
        except ValueError:
            raise ToolError(f"turn_id {turn_id!r} is not a turn id") from None
        return await run_in_threadpool(_status, get_runtime(), tenant_id, tid)

    return server


class _Authorized:
    """401 before the MCP layer when the bearer token is missing (its tenant is resolved per
    tool call). A class, so Starlette routes to it as an ASGI app."""

    def __init__(self, app: Asgi) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        headers = dict(scope.get("headers") or [])
        scheme, _, key = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
        if scheme.lower() != "bearer" or not key.strip():
            message = "use Authorization: Bearer <api key>"
            body = {"error": {"code": "unauthorized", "message": message, "details": {}}}
            await JSONResponse(body, status_code=401)(scope, receive, send)
            return
        await self.app(scope, receive, send)


def mount(app: FastAPI) -> Callable[[], Any]:
    """Serve `/mcp` on `app`; returns the context manager the app's lifespan must enter."""
    server = build_server()
    server.streamable_http_app(  # builds the session manager: stateless, JSON answers
        stateless_http=True,
        json_response=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    handler = _Authorized(StreamableHTTPASGIApp(server.session_manager))
    app.router.routes.append(Route("/mcp", handler, methods=["GET", "POST", "DELETE"]))

    @asynccontextmanager
    async def running() -> AsyncIterator[None]:
        async with server.session_manager.run():
            yield

    return running
