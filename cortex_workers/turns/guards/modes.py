"""Modes (`normal`, `frugal`, `local-only`): the strictest of the configuration's, the tenant's
and the session's is in force; `local-only` calls only local providers."""

from __future__ import annotations

from ...errors import InvalidRequest
from ...messages import JsonObject
from ...providers.locality import is_local
from ...routing import RouteSpec
from ...runtime import Runtime
from ...settings import Settings
from ...vocabulary import LlmMode

STRICTNESS = (LlmMode.NORMAL, LlmMode.FRUGAL, LlmMode.LOCAL_ONLY)
LOCAL_ONLY_CODE = "local_only"
AUTO = "auto"
"""A session's or turn's `model: "auto"`: the router chooses."""


def configured_mode(settings: Settings) -> LlmMode:
    """`[llm] mode`, made `local-only` by `[llm.privacy] local_only = true`."""
    if settings.llm_privacy.local_only:
        return LlmMode.LOCAL_ONLY
    return LlmMode(settings.llm_mode)


def strictest(*modes: str | None) -> LlmMode:
    """The strictest of the modes given (None: not set)."""
    ranks = [STRICTNESS.index(LlmMode(m)) for m in modes if m is not None]
    return STRICTNESS[max(ranks, default=0)]


def mode_in_force(settings: Settings, *, tenant: str | None, session: str | None) -> LlmMode:
    """A tenant or a session may choose a stricter mode than the configuration's, never a
    laxer one."""
    return strictest(configured_mode(settings), tenant, session)


def local_providers(rt: Runtime) -> list[str]:
    return [name for name, config in rt.providers.configs.items() if is_local(config)]


def provider_is_local(rt: Runtime, provider: str) -> bool:
    config = rt.providers.configs.get(provider)
    return config is not None and is_local(config)


def check_session_mode(
    rt: Runtime, *, provider: str, model: str, mode: LlmMode, routed: bool
) -> None:
    """A session asking for a non-local provider in mode `local-only` is refused (422
    `local_only`); a routed session (`model: "auto"` or a route) is routed to local ones."""
    if mode != LlmMode.LOCAL_ONLY or routed or provider_is_local(rt, provider):
        return
    raise InvalidRequest(
        f"provider {provider!r} is not local and mode local-only is in force: use a local "
        f"provider ({', '.join(local_providers(rt)) or 'none configured'})",
        code=LOCAL_ONLY_CODE,
        details={"provider": provider, "model": model, "local_providers": local_providers(rt)},
    )


def route_spec(
    turn_route: JsonObject | None, session_route: JsonObject | None, *, model: str | None
) -> RouteSpec | None:
    """The route request in force: the turn's, else the session's; `model: "auto"` alone asks
    for the default one (tier `auto`)."""
    stored = turn_route if turn_route is not None else session_route
    if stored is not None:
        return RouteSpec.model_validate(stored)
    return RouteSpec() if model == AUTO else None
