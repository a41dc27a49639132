"""The FastAPI application factory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import redis.asyncio as aioredis
from fastapi import FastAPI

from ..runtime import get_runtime
from . import errors
from .limits import BodySizeLimit
from .routes import events, meta, proposals, sessions, turns
from .schemas import ErrorOut

DESCRIPTION = """LLM conversations as durable background work.

Post a turn to a session and get `202` at once; watch its tokens, tool calls and `done` over
Server-Sent Events; read the stored history and status back. Every request needs
`Authorization: Bearer <api key>` (create one with `cortex-workers keys create --tenant NAME`).
Errors always have the shape `{"error": {"code", "message", "details"}}`.
"""


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    rt = get_runtime()
    app.state.redis = aioredis.Redis.from_url(
        rt.settings.redis_url,
        socket_connect_timeout=5,
        health_check_interval=30,
        max_connections=rt.settings.redis_pool_size * 20,
    )
    try:
        yield
    finally:
        await app.state.redis.aclose()


def create_app() -> FastAPI:
    settings = get_runtime().settings
    app = FastAPI(
        title="cortex-workers",
        version="0.1.0",
        description=DESCRIPTION,
        lifespan=lifespan,
        responses={code: {"model": ErrorOut} for code in (401, 404, 413, 422, 503)},
    )
    errors.install(app)
    for router in (sessions.router, turns.router, events.router, proposals.router, meta.router):
        app.include_router(router)
    app.add_middleware(BodySizeLimit, max_bytes=settings.request_max_bytes)
    return app
