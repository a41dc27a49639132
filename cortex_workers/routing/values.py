"""The router's values: a route request, the candidates it weighs, and its decision."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..messages import JsonObject
from ..vocabulary import ModelCapability, ModelTier, RouteRejection


@dataclass(frozen=True, slots=True)
class RouteRequest:
    """What a session or turn asked for (`route: {...}`), and what the step needs."""

    tier: ModelTier = ModelTier.AUTO
    max_cost_usd: float | None = None
    """A ceiling on the call's maximum estimated cost."""
    latency_sla_ms: int | None = None
    """A ceiling on the model's measured p95 latency (models never measured pass)."""
    capabilities: frozenset[ModelCapability] = frozenset()
    input_tokens: int = 0
    """The request's size, estimated (an upper bound)."""
    max_output_tokens: int = 4096
    tool_count: int = 0
    depth: int = 1
    """Which model step of the turn this is, from 1."""
    local_only: bool = False
    """Mode `local-only` or `[llm.privacy] local_only`: only local providers."""


@dataclass(frozen=True, slots=True)
class Candidate:
    """One provider:model the router may choose (from the catalog and the provider configs)."""

    provider: str
    model: str
    tier: ModelTier | None
    capabilities: frozenset[ModelCapability]
    context: int | None
    input_per_mtok: float
    output_per_mtok: float
    local: bool
    unavailable: str | None = None
    """Why the provider cannot be used (no key, cooling down), or None."""
    latency_p95_ms: float | None = None

    def max_cost(self, request: RouteRequest) -> float:
        return (
            request.input_tokens * self.input_per_mtok
            + request.max_output_tokens * self.output_per_mtok
        ) / 1e6


@dataclass(frozen=True, slots=True)
class Rejected:
    """A candidate passed over, and why (`detail` is for people)."""

    provider: str
    model: str
    why: RouteRejection
    detail: str

    def as_json(self) -> JsonObject:
        return {
            "provider": self.provider,
            "model": self.model,
            "why": self.why,
            "detail": self.detail,
        }


@dataclass(frozen=True, slots=True)
class RouteChoice:
    provider: str
    model: str
    tier: ModelTier | None


@dataclass(frozen=True, slots=True)
class RouteDecision:
    """What the router chose and why; recorded on the step as `route`."""

    provider: str
    model: str
    tier: ModelTier | None
    reason: str
    rejected: tuple[Rejected, ...] = ()
    fallbacks: tuple[RouteChoice, ...] = ()
    extra: JsonObject = field(default_factory=dict)
    """Further facts for the record (a frugal escalation, the tier `auto` settled on)."""

    def as_json(self) -> JsonObject:
        return {
            "provider": self.provider,
            "model": self.model,
            "tier": self.tier,
            "reason": self.reason,
            "rejected": [r.as_json() for r in self.rejected],
            "fallbacks": [
                {"provider": f.provider, "model": f.model, "tier": f.tier} for f in self.fallbacks
            ],
            **self.extra,
        }
