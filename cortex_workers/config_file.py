"""The configuration file: where it is (`CORTEX_CONFIG`, else `config/cortex.toml`), `${NAME}`
references to the environment, and the settings source that reads its tables into the fields
of `settings.Settings` (docs/configuration.md)."""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic_settings import PydanticBaseSettingsSource

DEFAULT_CONFIG = Path(__file__).resolve().parent.parent / "config" / "cortex.toml"
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


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
        if "agents" in data:  # `[agents.<name>]` tables: agent cards
            values["agents"] = data["agents"]
        llm = data.get("llm", {})
        for key, field_name in LLM_TABLE_KEYS.items():
            if key in llm:
                values.setdefault(field_name, llm[key])
        webhooks = data.get("webhooks", {})
        for key, field_name in WEBHOOKS_TABLE_KEYS.items():
            if key in webhooks:
                values.setdefault(field_name, webhooks[key])
        retention = data.get("retention", {})
        for key, field_name in (("days", "retention_days"), ("tenants", "retention_tenants")):
            if key in retention:
                values.setdefault(field_name, retention[key])
        if "recovery" in data:
            values.setdefault("recovery", data["recovery"])
        if "mcp" in data:  # `[mcp.servers.<name>]`: MCP servers as tool sources
            values.setdefault("mcp", data["mcp"])
        # Empty strings from unset ${ENV} references mean "not configured".
        return {k: v for k, v in values.items() if v != ""}


LLM_TABLE_KEYS = {
    "scripted": "llm_scripted",
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
    "budget": "llm_budget",
    "mode": "llm_mode",
    "privacy": "llm_privacy",
}
"""`[llm]` keys of the config file (docs/configuration.md) and the settings fields they fill."""

WEBHOOKS_TABLE_KEYS = {
    "allowed_private_hosts": "webhook_allowed_private_hosts",
    "backoff_base": "webhook_backoff_base_s",
    "backoff_max": "webhook_backoff_max_s",
    "retry_for": "webhook_retry_for_s",
    "timeout": "webhook_timeout_s",
    "dispatch_every_s": "webhook_dispatch_every_s",
}
"""`[webhooks]` keys of the config file (docs/webhooks.md) and the settings fields they fill."""
