"""Routing by tier, cost, latency and capability (docs/cost-and-privacy.md).

Public API:
- `RouteRequest`: what a session or turn asked for (`route: {...}`, `model: "auto"`) and what
  the step needs (input size, tools, depth, `local_only`).
- `Candidate`: one provider:model with its tier, capabilities, context, prices, locality,
  availability and measured p95 latency.
- `choose_route(candidates, request) -> RouteDecision` (`provider`, `model`, `tier`, `reason`,
  `rejected` each with `why`, `fallbacks`; `.as_json()` is what the step records as `route`).
  Raises `NoRoute` (code `no_route`) when nothing fits.
- `classify(request) -> ModelTier`: how tier `auto` decides.
- `RouteSpec`: the API's `route` object (pydantic), `.request(...)` builds a `RouteRequest`.
"""

from .router import NoRoute, choose_route, classify
from .spec import RouteSpec
from .values import Candidate, Rejected, RouteChoice, RouteDecision, RouteRequest

__all__ = [
    "Candidate",
    "NoRoute",
    "Rejected",
    "RouteChoice",
    "RouteDecision",
    "RouteRequest",
    "RouteSpec",
    "choose_route",
    "classify",
]
