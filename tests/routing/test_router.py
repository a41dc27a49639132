"""The router's choice for each tier and constraint, with the rejected candidates and why."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from cortex_workers.routing import (
    Candidate,
    NoRoute,
    Rejected,
    RouteRequest,
    choose_route,
    classify,
)
from cortex_workers.vocabulary import ModelCapability as Cap
from cortex_workers.vocabulary import ModelTier, RouteRejection

ALL = frozenset(Cap)


def cand(
    model: str,
    tier: ModelTier,
    *,
    price: tuple[float, float] = (1.0, 4.0),
    caps: frozenset[Cap] = frozenset({Cap.TOOLS, Cap.JSON}),
    context: int = 128_000,
    local: bool = False,
    unavailable: str | None = None,
    p95: float | None = None,
    provider: str = "cloud",
) -> Candidate:
    return Candidate(
        provider, model, tier, caps, context, price[0], price[1], local, unavailable, p95
    )


CATALOG = [
    cand("fast-cheap", ModelTier.FAST, price=(0.1, 0.4), p95=400),
    cand("fast-pricier", ModelTier.FAST, price=(0.5, 2.0), p95=300),
    cand("bal-cheap", ModelTier.BALANCED, price=(2.0, 8.0), p95=900),
    cand("bal-pricier", ModelTier.BALANCED, price=(3.0, 15.0), p95=800),
    cand("deep-strong", ModelTier.DEEP, price=(15.0, 75.0), caps=ALL, context=200_000, p95=4000),
    cand("deep-weaker", ModelTier.DEEP, price=(2.0, 8.0), caps=ALL - {Cap.VISION}, p95=2000),
    cand("local-small", ModelTier.FAST, price=(0, 0), local=True, provider="ollama", p95=1500),
]


def why(decision_rejected: Sequence[Rejected], model: str) -> RouteRejection:
    found = [r for r in decision_rejected if r.model == model]
    assert found, f"{model} was not rejected"
    return found[0].why


@pytest.mark.parametrize(
    ("tier", "model"),
    [
        (ModelTier.FAST, "local-small"),  # free is cheapest
        (ModelTier.BALANCED, "bal-cheap"),
        (ModelTier.DEEP, "deep-strong"),  # most capable, not cheapest
    ],
)
def test_an_explicit_tier_picks_its_cheapest_or_most_capable(tier: ModelTier, model: str) -> None:
    decision = choose_route(CATALOG, RouteRequest(tier=tier, input_tokens=50_000))
    assert (decision.model, decision.tier) == (model, tier)
    assert decision.reason.startswith(f"the requested tier {tier}")
    assert decision.fallbacks, "the next candidates form the fallback chain"
    assert all(f.model != model for f in decision.fallbacks)


def test_the_fallback_chain_stays_in_the_tier_first() -> None:
    decision = choose_route(CATALOG, RouteRequest(tier=ModelTier.BALANCED))
    assert [f.model for f in decision.fallbacks][:2] == ["bal-pricier", "deep-strong"]


@pytest.mark.parametrize(
    ("request_", "tier"),
    [
        (RouteRequest(input_tokens=200), ModelTier.FAST),
        (RouteRequest(input_tokens=200, tool_count=2), ModelTier.BALANCED),
        (RouteRequest(input_tokens=5_000), ModelTier.BALANCED),
        (RouteRequest(input_tokens=20_000), ModelTier.DEEP),
        (RouteRequest(input_tokens=200, tool_count=9), ModelTier.DEEP),
        (RouteRequest(input_tokens=200, depth=5), ModelTier.DEEP),
    ],
)
def test_auto_decides_by_prompt_size_tools_and_depth(
    request_: RouteRequest, tier: ModelTier
) -> None:
    assert classify(request_) == tier
    decision = choose_route(CATALOG, request_)
    assert decision.tier == tier and decision.reason.startswith(f"auto chose tier {tier}")


def test_an_explicit_tier_wins_over_auto() -> None:
    big = RouteRequest(tier=ModelTier.FAST, input_tokens=20_000, tool_count=12, depth=6)
    assert choose_route(CATALOG, big).tier == ModelTier.FAST


def test_local_only_rejects_every_remote_candidate_for_mode() -> None:
    decision = choose_route(CATALOG, RouteRequest(tier=ModelTier.DEEP, local_only=True))
    assert decision.model == "local-small"
    assert "no deep model fits" in decision.reason
    remote = [c.model for c in CATALOG if not c.local]
    assert {r.model for r in decision.rejected} == set(remote)
    assert {r.why for r in decision.rejected} == {RouteRejection.MODE}


def test_capabilities_filter() -> None:
    decision = choose_route(
        CATALOG, RouteRequest(tier=ModelTier.DEEP, capabilities=frozenset({Cap.VISION}))
    )
    assert decision.model == "deep-strong"
    assert why(decision.rejected, "deep-weaker") == RouteRejection.CAPABILITIES
    assert why(decision.rejected, "fast-cheap") == RouteRejection.CAPABILITIES


def test_context_fit() -> None:
    request = RouteRequest(tier=ModelTier.DEEP, input_tokens=150_000, max_output_tokens=8_000)
    decision = choose_route(CATALOG, request)
    assert decision.model == "deep-strong"  # 200k context
    assert why(decision.rejected, "deep-weaker") == RouteRejection.CONTEXT
    assert (
        "needs 158000 tokens"
        in next(r for r in decision.rejected if r.model == "deep-weaker").detail
    )


def test_cost_ceiling_is_on_the_maximum_estimate() -> None:
    # deep-strong: 10k in * 15 + 4096 out * 75 per million = 0.4572 USD at most
    request = RouteRequest(tier=ModelTier.DEEP, input_tokens=10_000, max_cost_usd=0.2)
    decision = choose_route(CATALOG, request)
    assert decision.model == "deep-weaker"
    assert why(decision.rejected, "deep-strong") == RouteRejection.COST
    roomy = RouteRequest(tier=ModelTier.DEEP, input_tokens=10_000, max_cost_usd=0.5)
    assert choose_route(CATALOG, roomy).model == "deep-strong"


def test_latency_sla_on_measured_p95() -> None:
    unmeasured = cand("deep-new", ModelTier.DEEP, caps=ALL, p95=None)
    request = RouteRequest(tier=ModelTier.DEEP, latency_sla_ms=2500)
    decision = choose_route([*CATALOG, unmeasured], request)
    assert decision.model in {"deep-weaker", "deep-new"}
    assert why(decision.rejected, "deep-strong") == RouteRejection.LATENCY
    assert all(r.model != "deep-new" for r in decision.rejected), "never measured: it passes"


def test_unavailable_providers_are_rejected_with_their_reason() -> None:
    down = cand("bal-down", ModelTier.BALANCED, price=(0.01, 0.01), unavailable="no API key")
    decision = choose_route([*CATALOG, down], RouteRequest(tier=ModelTier.BALANCED))
    assert decision.model == "bal-cheap"
    rejected = next(r for r in decision.rejected if r.model == "bal-down")
    assert (rejected.why, rejected.detail) == (RouteRejection.UNAVAILABLE, "no API key")


def test_nothing_fits_is_a_clear_error_listing_each_rejection() -> None:
    request = RouteRequest(capabilities=frozenset({Cap.VISION}), local_only=True)
    with pytest.raises(NoRoute) as caught:
        choose_route(CATALOG, request)
    assert caught.value.code == "no_route"
    assert "capabilities" in caught.value.message and "mode" in caught.value.message
    assert len(caught.value.details) == len(CATALOG)


def test_the_recorded_decision() -> None:
    decision = choose_route(CATALOG, RouteRequest(tier=ModelTier.FAST, local_only=True))
    doc = decision.as_json()
    assert doc["provider"] == "ollama" and doc["model"] == "local-small" and doc["tier"] == "fast"
    assert doc["reason"] and doc["fallbacks"] == []
    assert {"provider", "model", "why", "detail"} <= set(doc["rejected"][0])
