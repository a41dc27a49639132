"""Providers by name: how each is configured, which are usable, and the route a step takes.

Built-in names: `scripted`, `openai`, `ollama` (OpenAI-compatible, local, free),
`azure_openai`, `anthropic`; `[llm.providers.NAME]` tables may add more (with a `kind`). A
provider whose secret is missing is listed as unavailable with the reason, never an error.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any, cast

from ..errors import TerminalError
from ..llm_settings import ProviderSettings
from ..settings import Settings
from .base import ModelPrice, Provider
from .catalog import Catalog, ModelInfo, is_pattern
from .config import ProviderConfig, ProviderFields
from .reachability import unreachable

BUILTIN: dict[str, ProviderFields] = {
    "scripted": {"kind": "scripted", "model": "scripted-1", "free": True},
    "openai": {"kind": "openai", "model": "gpt-4o-mini"},
    "ollama": {
        "kind": "openai",
        "model": "llama3.1",
        "base_url": "http://127.0.0.1:11434/v1",
        "free": True,
    },
    "azure_openai": {"kind": "azure_openai", "model": ""},
    "anthropic": {"kind": "anthropic", "model": "claude-sonnet-4-5"},
}


class ConfigError(ValueError):
    """The LLM configuration cannot work (unknown names, a backup cycle)."""


@dataclass(frozen=True, slots=True)
class Route:
    """Which provider and model one attempt of a model step uses."""

    provider: str
    model: str
    fallback_from: str | None = None
    """The provider:model this route stands in for, when it is not the session's own."""


@dataclass(frozen=True, slots=True)
class ProviderInfo:
    """What `GET /v1/providers` shows about one provider."""

    name: str
    kind: str
    available: bool
    reason: str | None
    default_model: str
    models: tuple[str, ...]
    """Model names a session may use."""
    model_patterns: tuple[str, ...]
    """Catalog patterns (`gpt-*`): what they match is priced and described, but a session
    names a model, never a pattern."""
    base_url: str | None
    free: bool


def _given(values: Mapping[str, object]) -> ProviderFields:
    """The fields that are set: an empty or missing value does not override."""
    return cast(ProviderFields, {k: v for k, v in values.items() if v is not None})


def _env_overrides(name: str, s: Settings) -> ProviderFields:
    secret = {
        "openai": s.openai_api_key,
        "azure_openai": s.azure_openai_key,
        "anthropic": s.anthropic_api_key,
    }.get(name)
    values: dict[str, str | None] = {
        "openai": {"model": s.openai_model, "base_url": s.openai_api_base},
        "azure_openai": {
            "base_url": s.azure_openai_base_url,
            "model": s.azure_openai_deployment,
            "api_version": s.azure_openai_api_version,
        },
        "anthropic": {"model": s.anthropic_model, "base_url": s.anthropic_base_url},
        "ollama": {"base_url": s.ollama_base_url, "model": s.ollama_model},
    }.get(name, {})
    if secret is not None:
        values["api_key"] = secret.get_secret_value()
    return _given({k: v for k, v in values.items() if v})


def _from_table(table: ProviderSettings) -> ProviderFields:
    values: dict[str, object] = {
        "kind": table.kind,
        "model": table.deployment or table.model,
        "fast_model": table.fast_model,
        "max_tokens": table.max_tokens,
        "timeout_s": table.timeout,
        "base_url": table.base_url or table.endpoint,
        "api_version": table.api_version,
        "native_tools": table.native_tools,
        "no_tools_models": tuple(table.no_tools_models),
        "local": table.local,
        "api_key": table.api_key.get_secret_value() if table.api_key else None,
    }
    return _given(values)


def provider_configs(settings: Settings) -> dict[str, ProviderConfig]:
    """Every configured provider: built-ins, then `[llm.providers]`, then the environment."""
    names = list(BUILTIN) + [n for n in settings.llm_providers if n not in BUILTIN]
    out = {}
    for name in names:
        values: ProviderFields = {"name": name, **BUILTIN.get(name, {"model": ""})}
        if name in settings.llm_providers:
            values.update(_from_table(settings.llm_providers[name]))
        values.update(_env_overrides(name, settings))
        if values.get("kind") == "scripted":
            values["enabled"] = settings.llm_scripted
        if "kind" not in values:
            raise ConfigError(
                f"[llm.providers.{name}] needs a kind: openai, azure_openai or anthropic"
            )
        out[name] = ProviderConfig(**values)
    return out


@dataclass
class ProviderRegistry:
    """Provider configurations and instances (built on first use in each process)."""

    settings: Settings
    configs: dict[str, ProviderConfig] = field(init=False)
    catalog: Catalog = field(init=False)
    _instances: dict[str, Provider] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.configs = provider_configs(self.settings)
        self.catalog = Catalog(self.settings.llm_models)

    def names(self) -> list[str]:
        return list(self.configs)

    def default_provider(self) -> str:
        return self.settings.llm_provider

    def default_model(self, provider: str) -> str:
        if provider == self.settings.llm_provider and self.settings.llm_model:
            return self.settings.llm_model
        config = self.configs.get(provider)
        return config.model if config else ""

    def resolve(self, provider: str | None, model: str | None) -> tuple[str, str]:
        """The (provider, model) of a session: a model alone picks its provider by pattern."""
        if provider is None and model:
            info = self.catalog.lookup(model)
            provider = info.provider if info and info.provider in self.configs else None
        provider = provider or self.default_provider()
        return provider, model or self.default_model(provider)

    def unavailable(self, name: str) -> str | None:
        """Why `name` cannot be used, or None."""
        config = self.configs.get(name)
        if config is None:
            return f"unknown provider {name!r}; configured: {', '.join(self.names())}"
        return config.missing()

    def routes(self, provider: str, model: str) -> list[Route]:
        """The session's own route, then each backup model, then each fallback provider."""
        primary = Route(provider, model)
        out, seen = [primary], {(provider, model)}
        label = f"{provider}:{model}"
        info = self.catalog.lookup(model)
        while info is not None and info.backup:
            backup_model = info.backup
            backup_info = self.catalog.lookup(backup_model)
            backup_provider = (
                backup_info.provider if backup_info and backup_info.provider else provider
            )
            if (backup_provider, backup_model) in seen:
                break  # validate() refuses cycles at startup; never loop here
            seen.add((backup_provider, backup_model))
            out.append(Route(backup_provider, backup_model, label))
            info = backup_info
        for name in self.settings.llm_fallback_providers:
            route = Route(name, self.default_model(name), label)
            if (route.provider, route.model) not in seen and not self.unavailable(name):
                seen.add((route.provider, route.model))
                out.append(route)
        return [r for r in out if r is primary or not self.unavailable(r.provider)]

    def choose(self, routes: list[Route], *, attempt: int, cooling: set[str]) -> Route:
        """The route of this attempt: `attempts_per_provider` tries each in order; a route whose
        provider is cooling down hands its turn to the next one (or, at the end, the last
        usable one before it)."""
        index = min((attempt - 1) // self.settings.llm_attempts_per_provider, len(routes) - 1)
        later = [r for r in routes[index:] if r.provider not in cooling]
        earlier = [r for r in routes[:index] if r.provider not in cooling]
        if later:
            return later[0]
        return earlier[-1] if earlier else routes[index]

    def get(self, name: str) -> Provider:
        """The provider instance; an unknown or unusable one fails the turn clearly."""
        reason = self.unavailable(name)
        if reason is not None:
            raise TerminalError(
                f"provider {name!r} is unavailable: {reason}", code="provider_unavailable"
            )
        with self._lock:
            if name not in self._instances:
                self._instances[name] = self._build(self.configs[name])
            return self._instances[name]

    @staticmethod
    def _build(config: ProviderConfig) -> Provider:
        if config.kind == "scripted":
            from .scripted import ScriptedProvider

            return ScriptedProvider(timeout_s=config.timeout_s)
        if config.kind in ("openai", "azure_openai"):
            from .openai_chat import OpenAIChatProvider

            return OpenAIChatProvider(config)
        from .anthropic_messages import AnthropicProvider

        return AnthropicProvider(config)

    def redact(self, text: str) -> str:
        """`text` with every configured provider secret replaced (error messages may echo a
        key back; nothing secret is stored or streamed)."""
        for config in self.configs.values():
            if config.api_key and len(config.api_key) >= 6 and config.api_key in text:
                text = text.replace(config.api_key, "[redacted]")
        return text

    def native_tools(self, provider: str, model: str) -> bool:
        """Whether `model` on `provider` takes tools through the API (else through the prompt)."""
        config = self.configs[provider]
        if not config.native_tools or any(fnmatchcase(model, p) for p in config.no_tools_models):
            return False
        info = self.catalog.lookup(model)
        return not (info is not None and info.native_tools is False)

    def metric_model(self, provider: str, model: str) -> str:
        """`model` as a metrics label and latency-index key: the catalog's and the configured
        names as they are, any other (a tenant may send any name) as `other`, so the series
        stay bounded."""
        config = self.configs.get(provider)
        own = {config.model, config.fast_model} if config is not None else set()
        if self.catalog.named(model) or model in own or model == self.settings.llm_model:
            return model
        return "other"

    def price(self, provider: str, model: str) -> ModelPrice:
        config = self.configs.get(provider)
        info = self.catalog.lookup(model)
        if (config is not None and config.free) or info is None or info.price is None:
            return ModelPrice()
        return info.price

    def describe(self) -> list[ProviderInfo]:
        """Every provider as `GET /v1/providers` shows it; a self-hosted server that does not
        answer is unavailable (checked cheaply, remembered for a few seconds)."""
        out = []
        for name, config in self.configs.items():
            reason = self.unavailable(name)
            if reason is None and config.self_hosted:
                reason = unreachable(str(config.base_url))
            models = self.catalog.models_of(name)
            default = self.default_model(name)
            if default and not is_pattern(default) and default not in models:
                models.insert(0, default)  # a session may always name the default
            out.append(
                ProviderInfo(
                    name=name,
                    kind=config.kind,
                    available=reason is None,
                    reason=reason,
                    default_model=default,
                    models=tuple(m for m in models if not is_pattern(m)),
                    model_patterns=tuple(m for m in models if is_pattern(m)),
                    base_url=config.base_url,
                    free=config.free,
                )
            )
        return out

    def validate(self) -> None:
        """Refuse a configuration that cannot work: call at process start."""
        known = set(self.configs)
        if self.settings.llm_provider not in known:
            raise ConfigError(
                f"default provider {self.settings.llm_provider!r} is not "
                f"configured; known: {', '.join(sorted(known))}"
            )
        for name in self.settings.llm_fallback_providers:
            if name not in known:
                raise ConfigError(f"fallback provider {name!r} is not configured")
        for key, entry in self.settings.llm_models.items():
            if entry.provider is not None and entry.provider not in known:
                raise ConfigError(f'[llm.models."{key}"] names unknown provider {entry.provider!r}')
        for info in self.catalog.entries():
            chain: list[str] = [info.pattern]
            current: ModelInfo | None = info
            while current is not None and current.backup:
                if current.backup in chain:
                    raise ConfigError(
                        "backup models form a cycle: " + " -> ".join([*chain, current.backup])
                    )
                chain.append(current.backup)
                current = self.catalog.lookup(current.backup)

    def with_settings(self, **changes: Any) -> ProviderRegistry:
        """A registry on changed settings (tests and tools)."""
        return ProviderRegistry(self.settings.model_copy(update=changes))


__all__ = ["ConfigError", "ProviderInfo", "ProviderRegistry", "Route"]
