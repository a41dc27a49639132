"""Which tools a process offers: built-ins, operator packages, plugin manifests.

Operators add Python tools with a package exposing an entry point in the group
`cortex_workers.tools` (or a module named in `tool_modules`) whose target is a function
`register(registry)`; modules may also use the `@tool` decorator at import. Plugin manifests
come from the plugins directory. Anything that fails to load is reported, never fatal.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from .builtin import register_builtins
from .registry import ToolRegistry, default_registry

log = logging.getLogger(__name__)
ENTRY_POINT_GROUP = "cortex_workers.tools"


@dataclass(frozen=True, slots=True)
class Rejected:
    """A tool source that did not load, and why (GET /v1/tools shows these)."""

    source: str
    name: str | None
    reason: str


@dataclass
class LoadedTools:
    registry: ToolRegistry
    rejected: list[Rejected] = field(default_factory=list)
    dynamic_rejected: Callable[[], list[Rejected]] | None = None
    """Sources whose state changes while the process runs (unavailable MCP servers)."""

    def all_rejected(self) -> list[Rejected]:
        """Every source that did not load, and why, as of now."""
        extra = self.dynamic_rejected() if self.dynamic_rejected is not None else []
        return [*self.rejected, *extra]


def _register_with(
    loaded: LoadedTools, source: str, register: Callable[[ToolRegistry], Any]
) -> None:
    staging = ToolRegistry()
    try:
        register(staging)
    except Exception as exc:  # an operator's package must not stop the worker
        log.warning("tool source %s failed to load: %s", source, exc)
        loaded.rejected.append(Rejected(source, None, f"{type(exc).__name__}: {exc}"))
        return
    for t in staging.all():
        _add(loaded, source, t)


def _add(loaded: LoadedTools, source: str, t: Any) -> None:
    if t.source == "builtin" and source != "builtin":
        t = replace(t, source=source.split(" ")[0].replace("entry", "entry_point"))
    try:
        loaded.registry.register(t)
    except ValueError as exc:
        loaded.rejected.append(Rejected(source, t.name, str(exc)))


def load_tools(*, modules: Sequence[str] = (), plugins_dir: Path | None = None) -> LoadedTools:
    """A fresh registry for this process."""
    loaded = LoadedTools(ToolRegistry())
    register_builtins(loaded.registry)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            target = ep.load()
        except Exception as exc:
            loaded.rejected.append(
                Rejected(f"entry point {ep.name}", None, f"{type(exc).__name__}: {exc}")
            )
            continue
        _register_with(loaded, f"entry point {ep.name}", target)
    for name in modules:
        try:
            module = importlib.import_module(name)
        except Exception as exc:
            loaded.rejected.append(Rejected(f"module {name}", None, f"{type(exc).__name__}: {exc}"))
            continue
        if hasattr(module, "register"):
            _register_with(loaded, f"module {name}", module.register)
    for t in default_registry().all():  # tools registered with @tool at import
        if t.name not in loaded.registry:
            _add(loaded, "decorator", t)
    if plugins_dir is not None:
        from .plugins import load_plugins

        plugin_tools, rejected = load_plugins(plugins_dir)
        for t in plugin_tools:
            _add(loaded, f"plugin {t.name}", t)
        loaded.rejected += [Rejected(f"plugin {r.path}", r.name, r.reason) for r in rejected]
    return loaded
