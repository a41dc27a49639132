"""Choose a model for a step: filter the candidates by mode and privacy, availability,
capabilities, context fit, cost ceiling and latency SLA, then pick by tier.

Pure: the candidates (catalog, provider configs, measured latency) are built by the caller.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import TerminalError
from ..vocabulary import ModelTier, RouteRejection
from .values import Candidate, Rejected, RouteChoice, RouteDecision, RouteRequest

SIMPLE_MAX_INPUT_TOKENS = 1_000
"""`auto`: a first step of at most this many input tokens and no tools is simple."""
COMPLEX_MIN_INPUT_TOKENS = 16_000
COMPLEX_MIN_TOOLS = 8
COMPLEX_MIN_DEPTH = 4
"""`auto`: this many input tokens, tools offered or model steps deep makes it complex."""
MAX_FALLBACKS = 4

NEAREST: dict[ModelTier, tuple[ModelTier, ...]] = {
    ModelTier.FAST: (ModelTier.FAST, ModelTier.BALANCED, ModelTier.DEEP),
    ModelTier.BALANCED: (ModelTier.BALANCED, ModelTier.DEEP, ModelTier.FAST),
    ModelTier.DEEP: (ModelTier.DEEP, ModelTier.BALANCED, ModelTier.FAST),
}


class NoRoute(TerminalError):
    """No candidate passes the filters; `details` lists each with why."""

    def __init__(self, rejected: Sequence[Rejected]) -> None:
        reasons = sorted({r.why.value for r in rejected})
        super().__init__(
            "no model fits the route's constraints (rejected for: "
            + (", ".join(reasons) or "no candidates")
            + ")",
            code="no_route",
            details=[r.as_json() for r in rejected],
        )


def classify(request: RouteRequest) -> ModelTier:
    """Tier `auto`: by prompt size, tool count and depth."""
    if (
        request.input_tokens >= COMPLEX_MIN_INPUT_TOKENS
        or request.tool_count >= COMPLEX_MIN_TOOLS
        or request.depth >= COMPLEX_MIN_DEPTH
    ):
        return ModelTier.DEEP
    if (
        request.input_tokens <= SIMPLE_MAX_INPUT_TOKENS
        and request.tool_count == 0
        and request.depth == 1
    ):
        return ModelTier.FAST
    return ModelTier.BALANCED


def rejection(c: Candidate, request: RouteRequest) -> Rejected | None:
    """Why `c` cannot serve `request`, or None."""

    def no(why: RouteRejection, detail: str) -> Rejected:
        return Rejected(c.provider, c.model, why, detail)

    if request.local_only and not c.local:
        return no(RouteRejection.MODE, "mode local-only: the provider is not local")
    if c.unavailable is not None:
        return no(RouteRejection.UNAVAILABLE, c.unavailable)
    missing = request.capabilities - c.capabilities
    if missing:
        return no(RouteRejection.CAPABILITIES, "lacks " + ", ".join(sorted(missing)))
    need = request.input_tokens + request.max_output_tokens
    if c.context is not None and need > c.context:
        return no(RouteRejection.CONTEXT, f"needs {need} tokens, context is {c.context}")
    cost = c.max_cost(request)
    if request.max_cost_usd is not None and cost > request.max_cost_usd:
        return no(
            RouteRejection.COST, f"maximum cost ${cost:.6f} > ceiling ${request.max_cost_usd}"
        )
    p95 = c.latency_p95_ms
    if request.latency_sla_ms is not None and p95 is not None and p95 > request.latency_sla_ms:
        return no(RouteRejection.LATENCY, f"p95 {p95:.0f} ms > SLA {request.latency_sla_ms} ms")
    return None


def _order(tier: ModelTier, pool: list[Candidate], request: RouteRequest) -> list[Candidate]:
    """Cheapest first for fast and balanced; most capable first for deep."""
    if tier == ModelTier.DEEP:
        return sorted(
            pool,
            key=lambda c: (-len(c.capabilities), -(c.context or 0), -c.output_per_mtok, c.model),
        )
    return sorted(pool, key=lambda c: (c.max_cost(request), c.latency_p95_ms or 0.0, c.model))


def choose_route(candidates: Sequence[Candidate], request: RouteRequest) -> RouteDecision:
    """The chosen candidate, the rejected ones with why, and the fallback chain. Raises
    `NoRoute` when nothing fits."""
    rejected: list[Rejected] = []
    eligible: list[Candidate] = []
    for c in candidates:
        why = rejection(c, request)
        if why is None:
            eligible.append(c)
        else:
            rejected.append(why)
    if not eligible:
        raise NoRoute(rejected)
    explicit = request.tier != ModelTier.AUTO
    tier = request.tier if explicit else classify(request)
    ranked: list[Candidate] = []
    for t in NEAREST[tier]:
        ranked += _order(t, [c for c in eligible if c.tier == t], request)
    ranked += _order(ModelTier.BALANCED, [c for c in eligible if c.tier is None], request)
    chosen, rest = ranked[0], ranked[1 : 1 + MAX_FALLBACKS]
    for c in ranked[1 + MAX_FALLBACKS :]:
        rejected.append(Rejected(c.provider, c.model, RouteRejection.TIER, f"not {tier} tier"))
    how = "the requested" if explicit else "auto chose"
    pick = "most capable" if chosen.tier == ModelTier.DEEP else "cheapest"
    reason = f"{how} tier {tier}: {pick} {chosen.tier or 'untiered'} model that fits"
    if chosen.tier != tier:
        reason += f" (no {tier} model fits)"
    return RouteDecision(
        provider=chosen.provider,
        model=chosen.model,
        tier=chosen.tier,
        reason=reason,
        rejected=tuple(rejected),
        fallbacks=tuple(RouteChoice(c.provider, c.model, c.tier) for c in rest),
        extra={"requested_tier": request.tier, "decided_tier": tier},
    )
