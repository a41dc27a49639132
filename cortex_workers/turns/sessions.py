"""Creating a session: its provider, model and tools checked against what this deployment has."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from sqlalchemy.orm import Session as Db

from ..errors import InvalidRequest
from ..messages import JsonObject
from ..providers.catalog import is_pattern
from ..routing import RouteSpec
from ..runtime import Runtime
from ..store import repo
from ..store.db import transaction
from ..store.models import Session, Tenant
from ..store.whiteboard import create_board
from ..vocabulary import LlmMode
from ..whiteboard import offered_to
from .guards.modes import AUTO, check_session_mode, mode_in_force


@dataclass(frozen=True, slots=True)
class SessionSpec:
    """What a new session asks for; a None field takes the configured default."""

    name: str | None = None
    system_prompt: str | None = None
    provider: str | None = None
    model: str | None = None
    tools: list[str] | None = None
    """Tool names the model may call; None means every registered tool."""
    metadata: JsonObject = field(default_factory=dict)
    """Free-form; `metadata.script` drives the scripted provider."""
    user: str | None = None
    """The end user in the caller's system: per-user limits and usage are keyed by it."""
    mode: LlmMode | None = None
    """A stricter mode than the configuration's (`frugal`, `local-only`)."""
    route: RouteSpec | None = None
    """Let the router choose the model (also `model: "auto"`)."""
    whiteboard: bool = False
    """A coordinator session: it gets a whiteboard and the whiteboard's tools."""
    agents: list[str] | None = None
    """Agents offered as `<name>_agent` tools."""


def check_provider(rt: Runtime, spec: SessionSpec) -> None:
    """The provider is configured and usable now (its secret is set)."""
    if spec.provider is not None and spec.provider not in rt.providers.names():
        raise InvalidRequest(
            f"unknown provider {spec.provider!r}; see GET /v1/providers",
            code="unknown_provider",
            details={"providers": rt.providers.names()},
        )
    provider, model = rt.providers.resolve(spec.provider, spec.model)
    if is_pattern(model):
        raise InvalidRequest(
            f"model {model!r} is a pattern of the model catalog, not a model: name one model "
            f"(e.g. {rt.providers.default_model(provider)!r}); see GET /v1/providers",
            code="invalid_model",
            details={"provider": provider, "model": model},
        )
    reason = rt.providers.unavailable(provider)
    if reason is not None:
        raise InvalidRequest(
            f"provider {provider!r} is unavailable: {reason}",
            code="provider_unavailable",
            details={"provider": provider, "model": model, "reason": reason},
        )


def _check_tools(rt: Runtime, spec: SessionSpec) -> None:
    check_tools(rt, spec.tools)


def check_tools(rt: Runtime, tools: list[str] | None) -> None:
    """Every tool named is registered (or belongs to a configured MCP server that is down
    now), and every `<server>.*` names a configured MCP server (422 `unknown_tool`)."""
    if tools is None:
        return
    servers = rt.settings.mcp.servers
    patterns = {n for n in tools if n.endswith(".*")}
    mcp = rt.mcp
    missing = set(tools) - patterns - set(rt.tools.names())
    if mcp is not None:
        missing = {n for n in missing if n not in mcp.unavailable_tools()}
    unknown = sorted(missing | {p for p in patterns if p[:-2] not in servers})
    if unknown:
        raise InvalidRequest(
            f"unknown tools: {', '.join(unknown)}; see GET /v1/tools",
            code="unknown_tool",
            details={"unknown": unknown},
        )


def _check_mode(rt: Runtime, db: Db, tenant_id: uuid.UUID, spec: SessionSpec) -> None:
    """In mode `local-only` (the configuration's, the tenant's or the session's), a session
    naming a non-local provider is refused (422 `local_only`)."""
    tenant = db.get(Tenant, tenant_id)
    mode = mode_in_force(rt.settings, tenant=tenant.mode if tenant else None, session=spec.mode)
    provider, model = rt.providers.resolve(spec.provider, spec.model)
    routed = spec.route is not None or spec.model == AUTO
    check_session_mode(rt, provider=provider, model=model, mode=mode, routed=routed)


def _check_agents(rt: Runtime, spec: SessionSpec) -> None:
    """Every agent named is configured."""
    unknown = sorted(set(spec.agents or ()) - set(rt.agents.names()))
    if unknown:
        raise InvalidRequest(
            f"unknown agents: {', '.join(unknown)}; see GET /v1/agents",
            code="unknown_agent",
            details={"unknown": unknown},
        )


def create_session(rt: Runtime, tenant_id: uuid.UUID, spec: SessionSpec) -> Session:
    """Store a new session of `tenant_id`; `InvalidRequest` (422) for an unknown or unavailable
    provider, or unknown tools. The row comes back fully loaded, usable after the commit."""
    check_provider(rt, spec)
    _check_tools(rt, spec)
    _check_agents(rt, spec)
    with transaction(rt.db) as db:
        _check_mode(rt, db, tenant_id, spec)
        session = repo.insert_session(
            db,
            tenant_id,
            name=spec.name,
            system_prompt=spec.system_prompt,
            provider=spec.provider,
            model=spec.model,
            tools=spec.tools if not spec.whiteboard else _with_board_tools(spec.tools),
            metadata_=spec.metadata,
            user=spec.user,
            mode=spec.mode,
            route=spec.route.model_dump(mode="json") if spec.route is not None else None,
        )
        session.agents = spec.agents or None
        db.flush()  # before the refresh below, which would drop the change
        if spec.whiteboard:
            create_board(db, session.id)
        db.refresh(session)
    return session


def _with_board_tools(tools: list[str] | None) -> list[str] | None:
    """A coordinator's named tools and the whiteboard's (None: every tool, theirs included)."""
    return None if tools is None else offered_to(tools, has_whiteboard=True)
