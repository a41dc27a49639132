"""The `[llm]` tables of the config file: one provider, one model, one rate limit, privacy."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .settings_values import Duration, OptionalSecret, OptionalText


class ProviderSettings(BaseModel):
    """One `[llm.providers.NAME]` table."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["scripted", "openai", "azure_openai", "anthropic"] | None = None
    """Which protocol: inferred from the name for openai, ollama, azure_openai, anthropic."""
    api_key: OptionalSecret = None
    model: OptionalText = None
    fast_model: OptionalText = None
    max_tokens: int = Field(default=4096, ge=1)
    timeout: Duration = Field(default=60.0, gt=0)
    base_url: OptionalText = None
    endpoint: OptionalText = None
    """Ollama's name for `base_url`."""
    api_version: OptionalText = None
    deployment: OptionalText = None
    native_tools: bool = True
    no_tools_models: list[str] = Field(default_factory=list)
    local: bool | None = None
    """Whether calls stay on this machine or network (mode `local-only`, redaction); None:
    `ollama` and OpenAI-compatible servers on a loopback or private address are local."""


class ModelSettings(BaseModel):
    """One `[llm.models."NAME"]` table: overrides or additions to the price table."""

    model_config = ConfigDict(extra="forbid")
    provider: OptionalText = None
    context: int | None = Field(default=None, ge=1)
    tier: Literal["fast", "balanced", "deep"] | None = None
    input_per_mtok: float | None = Field(default=None, ge=0)
    output_per_mtok: float | None = Field(default=None, ge=0)
    native_tools: bool | None = None
    backup: OptionalText = None
    """Another model to use when this one keeps failing (may be on another provider)."""
    capabilities: list[Literal["tools", "vision", "json", "long_context", "reasoning"]] | None = (
        None
    )


class RateLimitSettings(BaseModel):
    """`[llm.rate_limits."PROVIDER"]` or `[llm.rate_limits."PROVIDER:MODEL"]`."""

    model_config = ConfigDict(extra="forbid")
    rpm: int | None = Field(default=None, ge=1)
    tpm: int | None = Field(default=None, ge=1)


LlmModeName = Literal["normal", "frugal", "local-only"]


class PrivacySettings(BaseModel):
    """`[llm.privacy]`: what is replaced before a call to a non-local provider."""

    model_config = ConfigDict(extra="forbid")
    redact_secrets: bool = True
    redact_pii: bool = False
    restore: bool = True
    """Put the original values back into the model's answer."""
    local_only: bool = False
    """The same as `[llm] mode = "local-only"`."""
    patterns: dict[str, str] = Field(default_factory=dict)
    """Operator patterns: kind name -> regular expression."""
    timeout: Duration = Field(default=2.0, gt=0)
    """A redaction taking longer fails the step (`redaction_failed`)."""
    phone_region: str = "US"
    """How phone numbers written without a country code are read."""
