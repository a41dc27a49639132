"""Providers, tools, health and readiness."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from sqlalchemy import text

from ..deps import RuntimeDep, TenantDep
from ..schemas import ProviderOut, ToolOut

router = APIRouter(tags=["meta"])


@router.get("/v1/providers", response_model=list[ProviderOut])
def providers(rt: RuntimeDep, _: TenantDep) -> list[ProviderOut]:
    """Configured providers, their models and whether they can be used (and if not, why)."""
    default = rt.providers.default_provider()
    return [
        ProviderOut(
            name=p.name,
            available=p.available,
            reason=p.reason,
            default_model=p.default_model,
            models=list(p.models),
            default=p.name == default,
        )
        for p in rt.providers.describe()
    ]


@router.get("/v1/tools", response_model=list[ToolOut])
def tools(rt: RuntimeDep, _: TenantDep) -> list[ToolOut]:
    """Tools a session may give its model, with their JSON Schemas."""
    out = []
    for name in rt.tools.names():
        tool = rt.tools.get(name)
        assert tool is not None
        out.append(
            ToolOut(
                name=tool.name,
                description=tool.description,
                parameters=tool.parameters,
                read_only=tool.read_only,
            )
        )
    return out


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


def _check(rt: RuntimeDep) -> dict[str, str]:
    checks: dict[str, str] = {}
    try:
        with rt.engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        checks["database"] = "ok"
    except Exception as exc:
        checks["database"] = f"unavailable: {type(exc).__name__}"
    try:
        rt.redis.ping()
        checks["redis"] = "ok"
    except Exception as exc:
        checks["redis"] = f"unavailable: {type(exc).__name__}"
    try:
        from celery import current_app

        with current_app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
        checks["broker"] = "ok"
    except Exception as exc:
        checks["broker"] = f"unavailable: {type(exc).__name__}"
    return checks


@router.get("/readyz")
async def readyz(rt: RuntimeDep) -> JSONResponse:
    """Database, Redis and broker reachable: 200, else 503 with what is down."""
    checks = await run_in_threadpool(_check, rt)
    ok = all(v == "ok" for v in checks.values())
    if ok:
        return JSONResponse({"status": "ok", "checks": checks})
    return JSONResponse(
        {"error": {"code": "unavailable", "message": "not ready", "details": checks}},
        status_code=503,
    )
