"""The `route` object of a session or a turn, as the API takes and stores it."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from ..vocabulary import ModelCapability, ModelTier
from .values import RouteRequest


class RouteSpec(BaseModel):
    """`route: {"tier", "max_cost_usd", "latency_sla_ms", "capabilities"}`."""

    model_config = ConfigDict(extra="forbid")
    tier: ModelTier = ModelTier.AUTO
    max_cost_usd: float | None = Field(default=None, gt=0)
    latency_sla_ms: int | None = Field(default=None, ge=1)
    capabilities: list[ModelCapability] = Field(default_factory=list)

    def request(
        self,
        *,
        input_tokens: int,
        max_output_tokens: int,
        tool_count: int,
        depth: int,
        local_only: bool,
    ) -> RouteRequest:
        return RouteRequest(
            tier=self.tier,
            max_cost_usd=self.max_cost_usd,
            latency_sla_ms=self.latency_sla_ms,
            capabilities=frozenset(self.capabilities),
            input_tokens=input_tokens,
            max_output_tokens=max_output_tokens,
            tool_count=tool_count,
            depth=depth,
            local_only=local_only,
        )
