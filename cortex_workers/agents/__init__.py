"""Agents: operator-declared cards, offered to a session's model as `<name>_agent` tools.

An agent runs as a sub-agent turn (`llm`), a python handler on the `agents` queue (`python`)
or a remote A2A agent (`a2a`); see docs/agents.md.
"""

from __future__ import annotations

from .cards import AgentCard, Skill
from .registry import AgentRegistry, RejectedCard, agent_tool_name, load_agents

__all__ = [
    "AgentCard",
    "AgentRegistry",
    "RejectedCard",
    "Skill",
    "agent_tool_name",
    "load_agents",
]
