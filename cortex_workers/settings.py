"""Typed settings: `config/cortex.toml` (path in `CORTEX_CONFIG`) overridden by the environment.

Built on first use (`get_settings()`), never at import time. `${NAME}` in the TOML file is
replaced by the environment variable `NAME` (empty when unset) so secrets stay out of the file.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

DEFAULT_CONFIG = Path(__file__).resolve().parent.parent / "config" / "cortex.toml"
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_NUMBER = r"(\d+(?:\.\d*)?|\.\d+)"
_DURATION_PART = re.compile(_NUMBER + r"(ms|s|m|h)")
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def env_references(text: str) -> list[str]:
    """The variable names `text` refers to as `${NAME}`, in order."""
    return _ENV_REF.findall(text)


def substitute_env(text: str, env: Mapping[str, str] = os.environ) -> str:
    """`text` with each `${NAME}` replaced by `env[NAME]`, empty when it is unset."""
    return _ENV_REF.sub(lambda m: env.get(m.group(1), ""), text)


def _substitute_env_deep(value: Any) -> Any:
    if isinstance(value, str):
        return substitute_env(value)
    if isinstance(value, dict):
        return {k: _substitute_env_deep(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute_env_deep(v) for v in value]
    return value


def parse_duration(text: str) -> float:
    """Seconds in `"60s"`, `"2m"`, `"500ms"`, `"1h"`, `"1m30s"` or a bare number of seconds;
    spaces are ignored. Raises ValueError naming the text when it is none of these."""
    compact = "".join(text.split())
    if re.fullmatch(_NUMBER, compact):
        return float(compact)
    parts = _DURATION_PART.findall(compact)
    if not parts or "".join(number + unit for number, unit in parts) != compact:
        raise ValueError(f"not a duration: {text!r} (use e.g. 60s, 2m, 500ms)")
    return sum(float(number) * _DURATION_UNITS[unit] for number, unit in parts)


def config_path() -> Path | None:
    """The TOML file in force: `CORTEX_CONFIG`, else `config/cortex.toml` when it exists."""
    explicit = os.environ.get("CORTEX_CONFIG")
    if explicit:
        return Path(explicit)
    return DEFAULT_CONFIG if DEFAULT_CONFIG.exists() else None


class TomlSource(PydanticBaseSettingsSource):
    """Reads the flat `[cortex]` table, the `[llm]` table and the `[retention]` table of the
    config file."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        path = config_path()
        if path is None:
            return {}
        if not path.exists():
            raise FileNotFoundError(f"CORTEX_CONFIG points at {path}, which does not exist")
        data = _substitute_env_deep(tomllib.loads(path.read_text()))
        values: dict[str, Any] = dict(data.get("cortex", {}))
        llm = data.get("llm", {})
        for key, field_name in LLM_TABLE_KEYS.items():
            if key in llm:
                values.setdefault(field_name, llm[key])
        retention = data.get("retention", {})
        for key, field_name in (("days", "retention_days"), ("tenants", "retention_tenants")):
            if key in retention:
                values.setdefault(field_name, retention[key])
        # Empty strings from unset ${ENV} references mean "not configured".
        return {k: v for k, v in values.items() if v != ""}


LLM_TABLE_KEYS = {
    "default_provider": "llm_provider",
    "default_model": "llm_model",
    "fallback_providers": "llm_fallback_providers",
    "providers": "llm_providers",
    "models": "llm_models",
    "rate_limits": "llm_rate_limits",
    "temperature": "llm_temperature",
    "system_prompt": "system_prompt",
    "max_tool_depth": "max_depth",
    "attempts_per_provider": "llm_attempts_per_provider",
    "cooldown_after_failures": "llm_cooldown_after_failures",
    "cooldown": "llm_cooldown_s",
    "rate_limit_max_wait": "llm_rate_wait_max_s",
}
"""`[llm]` keys of the config file (docs/configuration.md) and the settings fields they fill."""


def _duration(value: Any) -> Any:
    """A duration string (`parse_duration`) or a number of seconds."""
    return parse_duration(value) if isinstance(value, str) else value


Duration = Annotated[float, BeforeValidator(_duration)]


def _blank_is_none(value: Any) -> Any:
    return None if isinstance(value, str) and not value.strip() else value


OptionalText = Annotated[str | None, BeforeValidator(_blank_is_none)]
OptionalSecret = Annotated[SecretStr | None, BeforeValidator(_blank_is_none)]


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


class RateLimitSettings(BaseModel):
    """`[llm.rate_limits."PROVIDER"]` or `[llm.rate_limits."PROVIDER:MODEL"]`."""

    model_config = ConfigDict(extra="forbid")
    rpm: int | None = Field(default=None, ge=1)
    tpm: int | None = Field(default=None, ge=1)


class RetentionSettings(BaseModel):
    """One `[retention.tenants.NAME]` table."""

    model_config = ConfigDict(extra="forbid")
    days: float | None = Field(default=None, gt=0)
    """None keeps this tenant's history forever, whatever `[retention].days` says."""


class Settings(BaseSettings):
    """Everything a process needs to know, with defaults that run the dev stack."""

    model_config = SettingsConfigDict(
        env_prefix="CORTEX_", extra="ignore", populate_by_name=True, env_ignore_empty=True
    )

    database_url: str = Field(
        default="", validation_alias=AliasChoices("DATABASE_URL", "CORTEX_DATABASE_URL")
    )
    redis_url: str = Field(
        default="", validation_alias=AliasChoices("REDIS_URL", "CORTEX_REDIS_URL")
    )
    broker_url: str = Field(
        default="",
        validation_alias=AliasChoices("CELERY_BROKER_URL", "CORTEX_BROKER_URL"),
        description="Celery broker; defaults to REDIS_URL.",
    )
    llm_provider: str = Field(
        default="scripted", validation_alias=AliasChoices("LLM_PROVIDER", "CORTEX_LLM_PROVIDER")
    )
    llm_model: OptionalText = Field(default=None, validation_alias=AliasChoices("CORTEX_LLM_MODEL"))
    llm_temperature: float | None = Field(
        default=None, validation_alias=AliasChoices("LLM_TEMPERATURE", "CORTEX_LLM_TEMPERATURE")
    )
    llm_fallback_providers: list[str] = Field(default_factory=list)
    llm_providers: dict[str, ProviderSettings] = Field(default_factory=dict)
    llm_models: dict[str, ModelSettings] = Field(default_factory=dict)
    llm_rate_limits: dict[str, RateLimitSettings] = Field(default_factory=dict)
    llm_attempts_per_provider: int = Field(default=2, ge=1)
    llm_cooldown_after_failures: int = Field(default=5, ge=1)
    llm_cooldown_window_s: float = Field(default=60.0, gt=0)
    llm_cooldown_s: Duration = Field(default=60.0, gt=0)
    llm_rate_window_s: float = Field(default=60.0, gt=0)
    """The sliding window `rpm` and `tpm` limits are counted over (a minute)."""
    llm_worker_rate_limit: OptionalText = None
    """Celery's per-worker-process rate limit of model steps, e.g. "600/m" (none by default)."""
    llm_rate_wait_max_s: Duration = Field(default=2.0, ge=0)
    """A step that must wait longer than this for a rate limit re-queues itself instead."""

    # Provider secrets and endpoints from the environment (they override the config file).
    openai_api_key: OptionalSecret = Field(default=None, validation_alias="OPENAI_API_KEY")
    openai_model: OptionalText = Field(default=None, validation_alias="OPENAI_MODEL")
    openai_api_base: OptionalText = Field(default=None, validation_alias="OPENAI_API_BASE")
    azure_openai_key: OptionalSecret = Field(default=None, validation_alias="AZURE_OPENAI_KEY")
    azure_openai_base_url: OptionalText = Field(
        default=None, validation_alias="AZURE_OPENAI_BASE_URL"
    )
    azure_openai_deployment: OptionalText = Field(
        default=None, validation_alias="AZURE_OPENAI_DEPLOYMENT"
    )
    azure_openai_api_version: OptionalText = Field(
        default=None, validation_alias="AZURE_OPENAI_API_VERSION"
    )
    anthropic_api_key: OptionalSecret = Field(default=None, validation_alias="ANTHROPIC_API_KEY")
    anthropic_model: OptionalText = Field(default=None, validation_alias="ANTHROPIC_MODEL")
    anthropic_base_url: OptionalText = Field(default=None, validation_alias="ANTHROPIC_BASE_URL")
    ollama_base_url: OptionalText = Field(default=None, validation_alias="OLLAMA_BASE_URL")
    ollama_model: OptionalText = Field(default=None, validation_alias="OLLAMA_MODEL")

    system_prompt: str = Field(
        default="You are a helpful assistant.",
        validation_alias=AliasChoices("SYSTEM_PROMPT", "CORTEX_SYSTEM_PROMPT"),
    )

    # The turn loop.
    max_depth: int = Field(default=8, ge=1, description="Model steps per turn before it stops.")
    history_window: int = Field(default=20, ge=2, description="Recent messages the model sees.")
    turn_timeout_s: float = Field(default=600.0, gt=0, description="Deadline of a running turn.")
    max_attempts: int = Field(
        default=5, ge=1, le=998, description="Attempts per step before failing."
    )
    retry_base_s: float = Field(default=1.0, ge=0)
    retry_max_s: float = Field(default=30.0, ge=0)

    # Delivery.
    lease_s: float = Field(default=30.0, gt=0, description="A claimed step's lease; renewed.")
    republish_after_s: float = Field(
        default=30.0, gt=0, description="A pending step not claimed this long is re-published."
    )
    reconcile_every_s: float = Field(default=5.0, gt=0)
    liveness_s: float = Field(
        default=4.0,
        gt=0,
        description="A worker whose heartbeat is older than this is dead; its steps are taken.",
    )
    """Each worker process writes a heartbeat row every `liveness_s / 4` (docs/reliability.md)."""
    takeover_every_s: float = Field(
        default=1.0, gt=0, description="How often beat looks for steps of dead workers."
    )
    drain_s: float = Field(
        default=20.0, ge=0, description="On SIGTERM, running steps get this long to finish."
    )
    visibility_timeout_s: int = Field(default=43200, gt=0)

    # Retention (docs/retention.md).
    retention_days: float | None = Field(default=None, gt=0)
    """Finished turns, their steps and messages, and audit rows older than this are deleted;
    None keeps them forever."""
    retention_tenants: dict[str, RetentionSettings] = Field(default_factory=dict)
    """Per tenant (by name) overrides of `retention_days`."""
    retention_every_s: float = Field(default=3600.0, gt=0)
    retention_batch: int = Field(default=500, ge=1, le=10000)

    # Streaming.
    stream_ttl_s: int = Field(default=3600, gt=0, description="Stream kept after `done`.")
    sse_ping_s: float = Field(default=15.0, gt=0)

    # Tools.
    tool_timeout_s: float = Field(default=30.0, gt=0, description="Default per-tool timeout.")
    tool_max_timeout_s: float = Field(default=300.0, gt=0, description="Hard ceiling per call.")
    tool_progress_after_s: float = Field(
        default=30.0, gt=0, description="A call running this long emits `tool_progress`."
    )
    tool_modules: list[str] = Field(
        default_factory=list, description="Python modules imported to register more tools."
    )
    plugins_dir: OptionalText = None
    """Plugin tool manifests (*.yaml); default: config/plugins next to the package."""
    proposal_ttl_s: float = Field(default=600.0, gt=0, description="Unanswered proposals expire.")
    proposal_execution_timeout_s: float = Field(
        default=300.0, gt=0, description="An execution not reported by then is marked failed."
    )
    proposal_executor: str = Field(
        default="cortex_workers.executors:record_only",
        description="module:function run on a confirmed proposal.",
    )
    secret_key: OptionalSecret = Field(
        default=None, validation_alias=AliasChoices("CORTEX_SECRET_KEY", "SECRET_KEY")
    )
    """Signs pagination cursors; default: derived from DATABASE_URL (set it in production)."""
    tool_output_cap: int = Field(default=64 * 1024, gt=0)

    # Pools (per process).
    db_pool_size: int = Field(default=20, ge=1)
    redis_pool_size: int = Field(default=100, ge=1)

    # API.
    request_max_bytes: int = Field(default=1024 * 1024, gt=0)
    tenant_turns_per_minute: int | None = Field(default=600, ge=0)
    """Turns one tenant may submit in any 60 s, across every API replica; 0 (or None) turns the
    limit off. Replays of an Idempotency-Key the tenant already used are not counted."""
    tenant_sessions_per_minute: int | None = Field(default=600, ge=0)
    """Sessions one tenant may create in any 60 s, across every API replica; 0 (or None) turns
    the limit off."""
    api_host: str = "127.0.0.1"
    api_port: int = 8000

    def cursor_key(self) -> bytes:
        """The key pagination cursors are signed with, the same in every process."""
        import hashlib

        base = (
            self.secret_key.get_secret_value()
            if self.secret_key
            else f"cortex-cursors:{self.database_url}"
        )
        return hashlib.sha256(base.encode()).digest()

    @model_validator(mode="after")
    def _derive_broker(self) -> Settings:
        if not self.broker_url:
            self.broker_url = self.redis_url
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, TomlSource(settings_cls))


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings, read once."""
    return Settings()


def reset_settings() -> None:
    """Forget the cached settings (tests, and the dev command after it sets URLs)."""
    get_settings.cache_clear()
