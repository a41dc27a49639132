"""Typed settings: `config/cortex.toml` (path in `CORTEX_CONFIG`) overridden by the environment.

Built on first use (`get_settings()`), never at import time. `${NAME}` in the TOML file is
replaced by the environment variable `NAME` (empty when unset) so secrets stay out of the file.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from .budget_settings import BudgetSettings
from .config_file import DEFAULT_CONFIG as DEFAULT_CONFIG
from .config_file import TomlSource
from .config_file import config_path as config_path
from .config_file import env_references as env_references
from .config_file import substitute_env as substitute_env
from .llm_settings import (
    LlmModeName,
    ModelSettings,
    PrivacySettings,
    ProviderSettings,
    RateLimitSettings,
)
from .mcp_settings import McpSettings
from .recovery_settings import RecoverySettings
from .redis_target import SENTINEL_SCHEME, SentinelTarget, broker_url_for, sentinel_target
from .settings_values import CommaList, Duration, OptionalSecret, OptionalText
from .settings_values import parse_duration as parse_duration

MIN_SECRET_CHARS = 16
"""The shortest signing secret accepted (`CORTEX_SECRET_KEY`, `CORTEX_TOKEN_SECRET`)."""


class RetentionSettings(BaseModel):
    """One `[retention.tenants.NAME]` table."""

    model_config = ConfigDict(extra="forbid")
    days: float | None = Field(default=None, gt=0)
    """None keeps this tenant's history forever, whatever `[retention].days` says."""


DB_PING_AFTER_IDLE_S = 1.0
"""A pooled connection idle this long is pinged before use; one back from use within it is
not: a restart of Postgres takes longer, and what it breaks anyway invalidates the pool."""


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
    redis_sentinels: str = Field(
        default="", validation_alias=AliasChoices("REDIS_SENTINELS", "CORTEX_REDIS_SENTINELS")
    )
    """`host:port,host:port`: find the Redis primary through these sentinels (docs/fleet.md)."""
    redis_sentinel_master: str = Field(
        default="",
        validation_alias=AliasChoices("REDIS_SENTINEL_MASTER", "CORTEX_REDIS_SENTINEL_MASTER"),
    )
    """The name the sentinels monitor the primary under (often `mymaster`)."""
    llm_provider: str = Field(
        default="scripted", validation_alias=AliasChoices("LLM_PROVIDER", "CORTEX_LLM_PROVIDER")
    )
    llm_model: OptionalText = Field(default=None, validation_alias=AliasChoices("CORTEX_LLM_MODEL"))
    llm_scripted: bool = Field(default=False, validation_alias=AliasChoices("CORTEX_LLM_SCRIPTED"))
    """Enable the scripted provider (free, sleeps as told): `dev` and tests only."""
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
    llm_budget: BudgetSettings = Field(default_factory=BudgetSettings)
    llm_mode: LlmModeName = Field(
        default="normal", validation_alias=AliasChoices("LLM_MODE", "CORTEX_LLM_MODE")
    )
    llm_privacy: PrivacySettings = Field(default_factory=PrivacySettings)
    recovery: RecoverySettings = Field(default_factory=RecoverySettings)
    """`[recovery]` (env `CORTEX_RECOVERY`, JSON): loop guards, detectors, actions."""
    mcp: McpSettings = Field(default_factory=McpSettings)
    """`[mcp]` (env `CORTEX_MCP`, JSON): MCP servers whose tools sessions may use."""

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
    schedules_every_s: float = Field(
        default=1.0, gt=0, description="How often beat fires the due scheduled turns."
    )
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

    # Agents.
    agents_dir: OptionalText = None
    """Agent cards (*.yaml); default: config/agents next to the config file in force."""
    agents: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="Agent cards of the config file's `[agents.<name>]`."
    )
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
    token_secret: OptionalSecret = None
    """Signs session tokens (`POST /v1/sessions/{sid}/tokens`), the same in every API process;
    unset: `secret_key`, and without either session tokens are off. `dev` generates one."""
    tool_output_cap: int = Field(default=64 * 1024, gt=0)

    # Pools (per process).
    db_pool_size: int = Field(default=20, ge=1)
    db_ping_after_idle_s: float = Field(
        default=DB_PING_AFTER_IDLE_S,
        gt=0,
        description="A pooled Postgres connection idle this long is pinged before its next use.",
    )
    redis_pool_size: int = Field(default=100, ge=1)

    # API.
    request_max_bytes: int = Field(default=1024 * 1024, gt=0)
    image_max_bytes: int = Field(default=5 * 1024 * 1024, gt=0)
    """The largest image a user message may carry as a `data:` URL, decoded (413 beyond;
    a request is also bounded by `request_max_bytes`)."""
    images_per_message: int = Field(default=8, ge=0)
    """The most images one user message may carry (400/422 beyond; 0: no images)."""
    tenant_turns_per_minute: int | None = Field(default=600, ge=0)
    """Turns one tenant may submit in any 60 s, across every API replica; 0 (or None) turns the
    limit off. Replays of an Idempotency-Key the tenant already used are not counted."""
    tenant_sessions_per_minute: int | None = Field(default=600, ge=0)
    """Sessions one tenant may create in any 60 s, across every API replica; 0 (or None) turns
    the limit off."""
    # Tenant quotas (docs/security.md): jobs and batches per minute (0 or None: no limit);
    # schedules, webhooks and open event streams at once (429 `quota_exceeded` past them);
    # the shortest `every_s`; how often an open stream checks its credential again.
    tenant_jobs_per_minute: int | None = Field(default=600, ge=0)
    tenant_batches_per_minute: int | None = Field(default=10, ge=0)
    tenant_max_schedules: int = Field(default=100, ge=0)
    schedule_min_every_s: float = Field(default=60.0, ge=1)
    tenant_max_webhooks: int = Field(default=20, ge=0)
    tenant_max_streams: int = Field(default=100, ge=0)
    stream_recheck_s: float = Field(default=5.0, gt=0)
    api_host: str = "127.0.0.1"

    # Webhooks (docs/webhooks.md) and jobs (docs/jobs.md).
    webhook_allowed_private_hosts: CommaList = Field(default_factory=list)
    """Hosts (as written in the URL) a webhook may have although they are loopback or private."""
    webhook_backoff_base_s: Duration = Field(default=5.0, gt=0)
    webhook_backoff_max_s: Duration = Field(default=3600.0, gt=0)
    webhook_retry_for_s: Duration = Field(default=86400.0, gt=0)
    """A delivery not answered 2xx within this time after its event is given up (`failed`)."""
    webhook_timeout_s: Duration = Field(default=10.0, gt=0)
    webhook_dispatch_every_s: float = Field(default=1.0, gt=0)
    api_port: int = 8000

    def cursor_key(self) -> bytes:
        """The key pagination cursors are signed with, the same in every process."""
        import hashlib

        secret = self.secret_key or self.token_secret
        base = (
            f"cortex-cursors:{secret.get_secret_value()}"
            if secret
            else f"cortex-cursors:{self.database_url}"  # neither set: dev only (docs/security.md)
        )
        return hashlib.sha256(base.encode()).digest()

    def session_token_secret(self) -> bytes | None:
        """The secret session tokens are signed with, or None when tokens are off."""
        secret = self.token_secret or self.secret_key
        return secret.get_secret_value().encode() if secret else None

    def sentinel(self) -> SentinelTarget | None:
        """The Sentinel setup of REDIS_SENTINELS / REDIS_SENTINEL_MASTER (or a `sentinel://`
        REDIS_URL), or None for a plain Redis URL."""
        return sentinel_target(
            self.redis_url, sentinels=self.redis_sentinels, master=self.redis_sentinel_master
        )

    @model_validator(mode="after")
    def _long_secrets(self) -> Settings:
        for name, secret in (
            ("CORTEX_SECRET_KEY", self.secret_key),
            ("token_secret", self.token_secret),
        ):
            if secret is not None and len(secret.get_secret_value()) < MIN_SECRET_CHARS:
                raise ValueError(
                    f"{name} must be at least {MIN_SECRET_CHARS} characters (it signs tokens "
                    "and cursors); generate one with: python -c 'import secrets; "
                    "print(secrets.token_urlsafe(32))'"
                )
        return self

    @model_validator(mode="after")
    def _derive_broker(self) -> Settings:
        target = self.sentinel()  # raises, saying what to fix, for a bad Sentinel setup
        if target is not None and not self.redis_url.startswith(SENTINEL_SCHEME):
            # one form everywhere: children and `dev` pass REDIS_URL on as it is
            self.redis_url = broker_url_for(target)
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
