"""`/mcp`: cortex-workers as an MCP server (docs/mcp.md), a thin adapter over the routes'
domain functions, built with the official `mcp` SDK (the `mcp` extra).

Stateless streamable HTTP: no MCP session is kept, so any API replica answers any request.
The caller's API key is the bearer token, as on every route. Tools:

- `list_sessions`: the tenant's sessions, newest first;
- `ask`: start a turn (in the session named, or a new one) and return its answer once it is
  done, or its id and status when it is not done within `wait_s` (the turn goes on; its
  state is in Postgres, so any replica can be asked about it with `turn_status`);
- `turn_status`: a turn's status and answer.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, HTTPException
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.server.transport_security import TransportSecuritySettings
from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse
from starlette.routing import Route

from ..dispatch import publish
from ..runtime import Runtime, get_runtime
from ..store import repo
from ..store.db import transaction
from ..turns import sessions
from ..turns.submit import submit_turn
from ..vocabulary import TurnStatus
from .deps import tenant_of_key
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


def _status(rt: Runtime, tenant_id: uuid.UUID, turn_id: uuid.UUID) -> dict[str, Any]:
    with transaction(rt.db) as db:
        out = turn_out(db, require_turn(db, turn_id, tenant_id))
    return {
        "turn_id": str(out.id),
        "session_id": str(out.session_id),
        "status": str(out.status),
        "answer": out.answer,
        "error": out.error,
    }


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


def build_server() -> MCPServer:
    """The MCP server `/mcp` serves."""
    server: MCPServer = MCPServer(
        "cortex-workers", instructions="Durable LLM conversations: ask, and read answers."
    )

    @server.tool(description="The caller's sessions, newest first.")
    async def list_sessions(ctx: Context, limit: int = 20) -> dict[str, Any]:
        tenant_id = await _tenant(ctx)
        return {"sessions": await run_in_threadpool(_sessions, get_runtime(), tenant_id, limit)}

    @server.tool(
        description=(
            "Ask a question: a turn in the session named (or a new session) that runs in the "
            "background. Returns the answer when the turn is done within wait_s seconds, else "
            "its turn_id and status (ask turn_status later)."
        )
    )
    async def ask(
        content: str, ctx: Context, session_id: str | None = None, wait_s: float = 60.0
    ) -> dict[str, Any]:
        tenant_id = await _tenant(ctx)
        rt = get_runtime()
        turn_id = await run_in_threadpool(_start, rt, tenant_id, session_id, content)
        deadline = time.monotonic() + max(0.0, min(wait_s, MAX_WAIT_S))
        while True:
            status = await run_in_threadpool(_status, rt, tenant_id, turn_id)
            if status["status"] in ENDED or time.monotonic() >= deadline:
                return status
            await asyncio.sleep(0.2)

    @server.tool(description="A turn's status, and its answer once it is done.")
    async def turn_status(turn_id: str, ctx: Context) -> dict[str, Any]:
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
