"""Tools the model can call: definitions, the registry, the router, plugins."""

from cortex_workers.tools.registry import Tool, ToolRegistry, default_registry, tool
from cortex_workers.tools.results import ProposalRequest, ToolContext
from cortex_workers.tools.router import Limits, ToolOutcome, run_call

__all__ = [
    "Limits",
    "ProposalRequest",
    "Tool",
    "ToolContext",
    "ToolOutcome",
    "ToolRegistry",
    "default_registry",
    "run_call",
    "tool",
]
