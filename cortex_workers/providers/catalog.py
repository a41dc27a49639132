"""The model catalog: provider, context size, tier, capabilities and price of a model name or
pattern."""

from __future__ import annotations

import fnmatch
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..llm_settings import ModelSettings
from .base import ModelPrice

CATALOG_FILE = Path(__file__).with_name("models.toml")


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """What the product knows about a model (`pattern` is the catalog key that matched)."""

    pattern: str
    provider: str | None
    context: int | None
    tier: str | None
    price: ModelPrice | None
    """None: unknown price (costed at 0)."""
    native_tools: bool | None
    backup: str | None
    capabilities: frozenset[str] = frozenset()
    """`tools`, `vision`, `json`, `long_context`, `reasoning` (what the router may require)."""


def _info(pattern: str, entry: ModelSettings) -> ModelInfo:
    price = None
    if entry.input_per_mtok is not None and entry.output_per_mtok is not None:
        price = ModelPrice(entry.input_per_mtok, entry.output_per_mtok)
    return ModelInfo(
        pattern,
        entry.provider,
        entry.context,
        entry.tier,
        price,
        entry.native_tools,
        entry.backup,
        frozenset(entry.capabilities or ()),
    )


def _merge(base: ModelSettings, override: ModelSettings) -> ModelSettings:
    data: dict[str, Any] = base.model_dump()
    data.update(override.model_dump(exclude_unset=True))
    return ModelSettings.model_validate(data)


class Catalog:
    """The checked-in table (`models.toml`) with `[llm.models]` from the config on top."""

    def __init__(self, overrides: dict[str, ModelSettings] | None = None) -> None:
        raw = tomllib.loads(CATALOG_FILE.read_text())["models"]
        entries = {k: ModelSettings.model_validate(v) for k, v in raw.items()}
        for key, override in (overrides or {}).items():
            entries[key] = _merge(entries[key], override) if key in entries else override
        self._exact = {k: _info(k, v) for k, v in entries.items() if not is_pattern(k)}
        patterns = [(k, _info(k, v)) for k, v in entries.items() if is_pattern(k)]
        # The most specific pattern first: the longer its literal prefix, the more specific.
        self._patterns = sorted(patterns, key=lambda kv: -len(_literal_prefix(kv[0])))

    def named(self, model: str) -> bool:
        """Whether `model` has an entry of its own (not one a pattern matches)."""
        return model in self._exact

    def lookup(self, model: str) -> ModelInfo | None:
        """The entry for `model`: an exact name first, else the most specific pattern."""
        if model in self._exact:
            return self._exact[model]
        for pattern, info in self._patterns:
            if fnmatch.fnmatchcase(model, pattern):
                return info
        return None

    def models_of(self, provider: str) -> list[str]:
        """Catalog names and patterns served by `provider`."""
        return [
            k for k, v in {**self._exact, **dict(self._patterns)}.items() if v.provider == provider
        ]

    def entries(self) -> list[ModelInfo]:
        return [*self._exact.values(), *(info for _, info in self._patterns)]


def is_pattern(name: str) -> bool:
    """Whether `name` is an fnmatch pattern (`gpt-*`, `o[0-9]*`) rather than a model name."""
    return any(c in name for c in "*?[")


def _literal_prefix(pattern: str) -> str:
    for i, c in enumerate(pattern):
        if c in "*?[":
            return pattern[:i]
    return pattern
