"""The FastAPI application factory."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI

from ..observability.tracing import configure_tracing, shutdown_tracing
from ..redis_clients import async_client
from ..runtime import Runtime, get_runtime
from . import docs_pages, errors
from .limits import BodySizeLimit
from .openai_compat import OpenAIErrors
from .openai_compat import install as install_openai
from .redaction import install_log_redaction
from .routes import (
    agents,
    budget,
    checkpoints,
    compat,
    events,
    jobs,
    meta,
    metrics,
    proposals,
    schedules,
    sessions,
    timeline,
    tokens,
    turns,
    ui,
    webhooks,
    whiteboard,
)
from .schemas import ErrorOut
from .telemetry import RequestTelemetry
from .turn_lookup import TurnLookups

log = logging.getLogger(__name__)

DESCRIPTION = """LLM conversations as durable background work.

Post a turn to a session and get `202` at once; watch its tokens, tool calls and `done` over
Server-Sent Events; read the stored history and status back. Every request needs
`Authorization: Bearer <api key>` (create one with `cortex-workers keys create --tenant NAME`).
Errors always have the shape `{"error": {"code", "message", "details"}}`.
"""


def _reload_tools_on_sighup(rt: Runtime) -> None:
    """Plugin manifests and tool modules are read at startup, and again on SIGHUP."""

    def reload() -> None:
        rt.reload_tools()
        log.info(
            "tools reloaded: %d loaded, %d rejected",
            len(rt.tools.names()),
            len(rt.loaded_tools.rejected),
        )

    try:
        asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, reload)
    except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or Windows
        log.debug("SIGHUP reload not available in this process")


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    configure_tracing("cortex-workers-api")  # off unless the OTEL_* variables ask for it
    rt = get_runtime()
    _reload_tools_on_sighup(rt)
    app.state.redis = async_client(
        rt.settings.redis_url,
        rt.settings.sentinel(),
        socket_connect_timeout=5,
        health_check_interval=30,
        max_connections=rt.settings.redis_pool_size * 20,
    )
    app.state.turn_lookups = TurnLookups(rt)
    try:
        async with app.state.mcp_running():
            yield
    finally:
        await app.state.redis.aclose()
        shutdown_tracing()


def _without_native_telemetry() -> dict[str, Any]:
    """FastAPI versions with telemetry of their own would add a second span per request (and
    OpenTelemetry metrics) once tracing sets the global provider: `RequestTelemetry` is the
    one that measures and traces requests here."""
    if "telemetry" not in inspect.signature(FastAPI).parameters:
        return {}
    return {"telemetry": {"tracing": False, "metrics": False, "logs": False}}


def _mount_mcp(app: FastAPI) -> Any:
    """`/mcp` when the `mcp` extra is installed (docs/mcp.md); nothing to run otherwise."""
    try:
        from .mcp_endpoint import mount
    except ImportError:
        log.info("/mcp is off: the mcp extra is not installed")
        return contextlib.nullcontext
    return mount(app)


def create_app() -> FastAPI:
    settings = get_runtime().settings
    app = FastAPI(
        title="cortex-workers",
        version="0.1.0",
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,  # served by docs_pages, with local assets
        redoc_url=None,
        responses={code: {"model": ErrorOut} for code in (401, 404, 413, 422, 429, 503)},
        **_without_native_telemetry(),
    )
    errors.install(app)
    install_log_redaction()
    routers = (
        sessions,
        tokens,
        turns,
        timeline,
        events,
        proposals,
        agents,
        schedules,
        whiteboard,
        jobs,
        webhooks,
        meta,
        metrics,
        budget,
        checkpoints,
    )
    for module in (*routers, compat):
        app.include_router(module.router)
    install_openai(app)
    ui.mount(app)
    docs_pages.mount(app)
    app.state.mcp_running = _mount_mcp(app)
    app.add_middleware(BodySizeLimit, max_bytes=settings.request_max_bytes)
    app.add_middleware(OpenAIErrors)  # outside the size limit: its 413s too
    app.add_middleware(RequestTelemetry)  # outermost: measures the 413s too
    return app
