"""The router's inputs from this deployment (catalog, provider configs, measured latency) and
its decision as the routes of a step's attempts."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace

from ...budget.estimate import image_count
from ...messages import ModelRequest
from ...providers.latency import latency_of
from ...providers.locality import is_local
from ...providers.registry import Route
from ...routing import Candidate, RouteDecision, RouteSpec, choose_route
from ...runtime import Runtime
from ...vocabulary import ModelCapability, ModelTier
from .rate_limit import estimate_input_tokens

KEYLESS_BUILTINS = frozenset({"scripted", "ollama"})
"""Built-ins usable without any configuration: offered to the router only when configured."""


def offered(rt: Runtime, name: str) -> bool:
    """Whether the router may choose `name`: a provider needing no key (the scripted test
    provider, a local Ollama) only when the deployment names or configures it."""
    s = rt.settings
    if name not in KEYLESS_BUILTINS:
        return True
    configured = name in s.llm_providers or (name == "ollama" and bool(s.ollama_base_url))
    return configured or name == s.llm_provider or name in s.llm_fallback_providers


def _pairs(rt: Runtime) -> list[tuple[str, str]]:
    """Every concrete provider:model: the catalog's exact names on configured providers, and
    each provider's default and fast models."""
    registry = rt.providers
    pairs = [
        (info.provider, info.pattern)
        for info in registry.catalog.entries()
        if info.provider in registry.configs and not any(c in info.pattern for c in "*?[")
    ]
    for name, config in registry.configs.items():
        for model in (registry.default_model(name), config.fast_model):
            if model:
                pairs.append((name, model))
    return [p for p in dict.fromkeys(pairs) if offered(rt, p[0])]


def candidates(rt: Runtime, *, cooling: Collection[str] = ()) -> list[Candidate]:
    registry = rt.providers
    pairs = _pairs(rt)
    latency = latency_of(rt.redis, pairs)
    out = []
    for provider, model in pairs:
        info = registry.catalog.lookup(model)
        price = registry.price(provider, model)
        reason = registry.unavailable(provider)
        if reason is None and provider in cooling:
            reason = "cooling down after repeated failures"
        stats = latency.get((provider, model))
        out.append(
            Candidate(
                provider=provider,
                model=model,
                tier=ModelTier(info.tier) if info and info.tier else None,
                capabilities=frozenset(
                    ModelCapability(c) for c in (info.capabilities if info else ())
                ),
                context=info.context if info else None,
                input_per_mtok=price.input_per_mtok,
                output_per_mtok=price.output_per_mtok,
                local=is_local(registry.configs[provider]),
                unavailable=reason,
                latency_p95_ms=stats.p95_ms if stats else None,
            )
        )
    return out


def decide_route(
    rt: Runtime,
    spec: RouteSpec,
    request: ModelRequest,
    *,
    depth: int = 1,
    local_only: bool = False,
    cooling: Collection[str] = (),
) -> RouteDecision:
    """The router's choice for `request` (raises `routing.NoRoute`). Sends nothing: the dry
    run calls it too."""
    max_tokens = (
        request.max_tokens or rt.providers.configs[rt.providers.default_provider()].max_tokens
    )
    wanted = spec.request(
        input_tokens=estimate_input_tokens(request),
        max_output_tokens=max_tokens,
        tool_count=len(request.tools),
        depth=depth,
        local_only=local_only,
    )
    if image_count(request):  # only a model that reads images can take it
        wanted = replace(wanted, capabilities=wanted.capabilities | {ModelCapability.VISION})
    return choose_route(candidates(rt, cooling=cooling), wanted)


def routes_of(decision: RouteDecision) -> list[Route]:
    """The chosen route, then the fallback chain (each standing in for the choice)."""
    label = f"{decision.provider}:{decision.model}"
    return [
        Route(decision.provider, decision.model),
        *(Route(f.provider, f.model, label) for f in decision.fallbacks),
    ]
