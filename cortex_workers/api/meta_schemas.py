"""Response bodies of `GET /v1/providers` and `GET /v1/tools`."""

from __future__ import annotations

from pydantic import BaseModel, Field

from ..messages import JsonObject


class CooldownOut(BaseModel):
    seconds_left: float
    reason: str


class RateLimitOut(BaseModel):
    scope: str
    rpm: int | None
    tpm: int | None


class CatalogModelOut(BaseModel):
    name: str = Field(description="A model name or pattern of the catalog.")
    tier: str | None
    capabilities: list[str]
    context: int | None


class LatencyOut(BaseModel):
    model: str
    p50_ms: float
    p95_ms: float
    samples: int = Field(description="Recent calls measured (the last 200 at most).")


class ProviderOut(BaseModel):
    name: str
    kind: str
    available: bool
    reason: str | None = Field(description="Why the provider cannot be used, when it cannot.")
    default_model: str
    models: list[str] = Field(
        description="Catalog model names it serves (names a session may use)."
    )
    model_patterns: list[str] = Field(
        default_factory=list,
        description="Catalog patterns it serves (`gpt-*`): priced and described, never a "
        "session's model.",
    )
    free: bool
    default: bool
    fallback: bool = Field(description="In the configured fallback chain.")
    cooldown: CooldownOut | None = Field(
        description="Set while the provider is skipped after repeated failures."
    )
    rate_limits: list[RateLimitOut]
    local: bool = Field(
        default=False,
        description="Calls stay local: mode local-only may use it, and nothing is redacted.",
    )
    catalog: list[CatalogModelOut] = Field(
        default_factory=list, description="Tier, capabilities and context of its models."
    )
    latency: list[LatencyOut] = Field(
        default_factory=list, description="Measured on real calls, per model."
    )


class ToolOut(BaseModel):
    name: str
    description: str
    parameters: JsonObject
    """Its arguments' JSON Schema."""
    read_only: bool
    source: str = Field(description="builtin, module, entry_point, decorator or plugin")
    timeout_s: float | None
    max_timeout_s: float | None
    paginated: bool


class RejectedToolOut(BaseModel):
    source: str
    name: str | None
    reason: str


class ToolsOut(BaseModel):
    tools: list[ToolOut]
    rejected: list[RejectedToolOut] = Field(
        description="Tool sources (plugin manifests, modules) that did not load, and why."
    )
