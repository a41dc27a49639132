"""Providers, tools, health and readiness."""

from __future__ import annotations

import uuid

import redis
from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from ...providers.latency import LatencyStats, measured
from ...providers.locality import is_local
from ...providers.registry import ProviderRegistry
from ...runtime import Runtime
from ...store.db import transaction
from ...store.models import Tenant
from ...tools.router import tenant_allowed
from ..deps import RuntimeDep, TenantDep
from ..errors import error_response
from ..meta_schemas import (
    CatalogModelOut,
    CooldownOut,
    LatencyOut,
    ProviderOut,
    RateLimitOut,
    RejectedToolOut,
    ToolOut,
    ToolsOut,
)
from ..readiness import is_ready, readiness
from ..views import for_tenants, shown_source

router = APIRouter(tags=["meta"])


@router.get("/v1/providers", response_model=list[ProviderOut])
def providers(rt: RuntimeDep, _: TenantDep) -> list[ProviderOut]:
    """Configured providers, their models, whether they can be used (and if not, why), and
    whether they are cooling down after repeated failures. Where a provider is (its
    `base_url`) is the operator's to know: never shown, not even inside a reason."""
    registry = rt.providers
    infos = registry.describe()
    cooling = rt.health.cooling([p.name for p in infos])
    limits = rt.settings.llm_rate_limits
    try:
        latency = measured(rt.redis)
    except redis.RedisError:
        latency = {}
    out = []
    for p in infos:
        cooldown = cooling.get(p.name)
        out.append(
            ProviderOut(
                name=p.name,
                kind=p.kind,
                available=p.available,
                reason=for_tenants(p.reason, p.base_url),
                default_model=p.default_model,
                models=list(p.models),
                model_patterns=list(p.model_patterns),
                free=p.free,
                default=p.name == registry.default_provider(),
                fallback=p.name in rt.settings.llm_fallback_providers,
                cooldown=CooldownOut(
                    seconds_left=round(cooldown.seconds_left, 1),
                    reason=for_tenants(cooldown.reason, p.base_url) or "",
                )
                if cooldown
                else None,
                rate_limits=[
                    RateLimitOut(scope=scope, rpm=lim.rpm, tpm=lim.tpm)
                    for scope, lim in limits.items()
                    if scope == p.name or scope.startswith(p.name + ":")
                ],
                local=is_local(registry.configs[p.name]),
                catalog=_catalog(registry, p.name),
                latency=_latency(latency, p.name),
            )
        )
    return out


def _catalog(registry: ProviderRegistry, provider: str) -> list[CatalogModelOut]:
    return [
        CatalogModelOut(
            name=info.pattern,
            tier=info.tier,
            capabilities=sorted(info.capabilities),
            context=info.context,
        )
        for info in registry.catalog.entries()
        if info.provider == provider
    ]


def _latency(measured: dict[tuple[str, str], LatencyStats], provider: str) -> list[LatencyOut]:
    return [
        LatencyOut(model=model, p50_ms=s.p50_ms, p95_ms=s.p95_ms, samples=s.samples)
        for (name, model), s in sorted(measured.items())
        if name == provider
    ]


@router.get("/v1/tools", response_model=ToolsOut)
def tools(rt: RuntimeDep, tenant_id: TenantDep) -> ToolsOut:
    """Tools a session of this tenant may give its model, with their schemas, and the tool
    sources (plugin manifests, operator modules) that were rejected, with the reason. A tool
    the operator restricted to other tenants is not listed; the restriction itself is never
    shown."""
    loaded = rt.loaded_tools
    name = _tenant_name(rt, tenant_id)
    return ToolsOut(
        tools=[
            ToolOut(
                name=t.name,
                description=t.description,
                parameters=t.offered_parameters(),
                read_only=t.read_only,
                source=t.source,
                timeout_s=t.timeout_s,
                max_timeout_s=t.max_timeout_s,
                paginated=t.paginated,
            )
            for t in loaded.registry.all()
            if tenant_allowed(t, tenant_id=str(tenant_id), tenant_name=name)
        ],
        rejected=[
            RejectedToolOut(source=shown_source(r.source), name=r.name, reason=r.reason)
            for r in loaded.all_rejected()
        ],
    )


def _tenant_name(rt: Runtime, tenant_id: uuid.UUID) -> str | None:
    with transaction(rt.db) as db:
        tenant = db.get(Tenant, tenant_id)
        return tenant.name if tenant is not None else None


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(rt: RuntimeDep) -> JSONResponse:
    """Database, Redis and broker reachable: 200, else 503 with what is down."""
    checks = await run_in_threadpool(readiness, rt)
    if is_ready(checks):
        return JSONResponse({"status": "ok", "checks": checks})
    return error_response(503, "unavailable", "not ready", checks)
