"""Providers by name: which exist, which are usable, and which one a session gets."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import TerminalError
from ..settings import Settings
from .base import ModelPrice, Provider
from .scripted import ScriptedProvider


@dataclass(frozen=True, slots=True)
class ProviderInfo:
    """What `GET /v1/providers` shows about one provider."""

    name: str
    available: bool
    reason: str | None
    default_model: str
    models: tuple[str, ...] = ()


@dataclass
class ProviderRegistry:
    """Provider instances, built on first use in each process."""

    settings: Settings
    _factories: dict[str, Callable[[], Provider]] = field(default_factory=dict)
    _instances: dict[str, Provider] = field(default_factory=dict)
    _prices: dict[str, ModelPrice] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._factories["scripted"] = ScriptedProvider
        self._prices["scripted-1"] = ModelPrice(0.0, 0.0)

    def names(self) -> list[str]:
        return sorted(self._factories)

    def default_provider(self) -> str:
        return self.settings.llm_provider

    def default_model(self, provider: str) -> str:
        return self.settings.llm_model if provider == self.settings.llm_provider else "scripted-1"

    def get(self, name: str) -> Provider:
        """The provider called `name`; an unknown or unusable one fails the turn clearly."""
        if name not in self._factories:
            raise TerminalError(
                f"unknown provider {name!r}; configured providers: {', '.join(self.names())}",
                code="provider_unknown",
            )
        if name not in self._instances:
            self._instances[name] = self._factories[name]()
        return self._instances[name]

    def price(self, model: str) -> ModelPrice:
        return self._prices.get(model, ModelPrice())

    def describe(self) -> list[ProviderInfo]:
        out = []
        for name in self.names():
            available, reason = True, None
            out.append(
                ProviderInfo(
                    name,
                    available,
                    reason,
                    self.default_model(name),
                    tuple(m for m in self._prices if name == "scripted"),
                )
            )
        if self.settings.llm_provider not in self._factories:
            out.append(
                ProviderInfo(
                    self.settings.llm_provider,
                    False,
                    "configured as the default provider but not supported yet",
                    self.settings.llm_model,
                )
            )
        return out
