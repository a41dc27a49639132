"""Loading agent cards (`config/agents/*.yaml`, `[agents.<name>]` in cortex.toml) into a
registry; a card that does not validate is kept as rejected, with its reason."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from ..messages import ToolSpec
from ..tools.manifests import InvalidManifest, read_manifest
from .cards import AgentCard

TOOL_SUFFIX = "_agent"
_CARD: TypeAdapter[AgentCard] = TypeAdapter(AgentCard)


def agent_tool_name(agent: str) -> str:
    """The tool a session's model calls to run `agent`."""
    return f"{agent}{TOOL_SUFFIX}"


@dataclass(frozen=True, slots=True)
class RejectedCard:
    """A card that did not load, and why (GET /v1/agents shows these)."""

    source: str
    name: str | None
    reason: str


@dataclass
class AgentRegistry:
    cards: dict[str, AgentCard] = field(default_factory=dict)
    rejected: list[RejectedCard] = field(default_factory=list)

    def get(self, name: str) -> AgentCard | None:
        return self.cards.get(name)

    def by_tool(self, tool_name: str) -> AgentCard | None:
        """The agent a `<name>_agent` tool call runs, if it is one."""
        if not tool_name.endswith(TOOL_SUFFIX):
            return None
        return self.cards.get(tool_name.removesuffix(TOOL_SUFFIX))

    def names(self) -> list[str]:
        return sorted(self.cards)

    def specs(self, names: list[str]) -> list[ToolSpec]:
        """The tools of the named agents (unknown names are skipped: checked at creation)."""
        return [
            ToolSpec(agent_tool_name(c.name), tool_description(c), c.input_schema)
            for c in (self.cards.get(n) for n in names)
            if c is not None
        ]


def tool_description(card: AgentCard) -> str:
    skills = "; ".join(
        f"{s.name}: {s.description}" if s.description else s.name for s in card.skills
    )
    mode = (
        "Runs in the background: you get a task id at once and the answer arrives later."
        if card.mode == "background"
        else "Runs now; its answer is this tool's result."
    )
    return " ".join(
        p for p in (card.description, f"Skills: {skills}." if skills else "", mode) if p
    )


def _reason(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"] if p not in ("llm", "python", "a2a"))
        parts.append(f"{where}: {error['msg']}" if where else error["msg"])
    return "; ".join(parts)


def _add(registry: AgentRegistry, source: str, data: Mapping[str, Any]) -> None:
    name = data.get("name") if isinstance(data.get("name"), str) else None
    try:
        card = _CARD.validate_python(dict(data))
    except ValidationError as exc:
        registry.rejected.append(RejectedCard(source, name, _reason(exc)))
        return
    if card.name in registry.cards:
        registry.rejected.append(RejectedCard(source, name, f"duplicate agent name {card.name!r}"))
        return
    registry.cards[card.name] = card


def load_agents(
    directory: Path | None, configured: Mapping[str, Mapping[str, Any]] | None = None
) -> AgentRegistry:
    """Cards of `directory/*.yaml` (sorted by file name), then the config file's."""
    registry = AgentRegistry()
    if directory is not None and directory.is_dir():
        for path in sorted(directory.glob("*.y*ml")):
            try:
                data = read_manifest(path)
            except InvalidManifest as exc:
                registry.rejected.append(RejectedCard(str(path), None, str(exc)))
                continue
            _add(registry, str(path), data)
    for name, table in (configured or {}).items():
        _add(registry, f"cortex.toml [agents.{name}]", {"name": name, **table})
    return registry
