"""Tools the model can call: definitions, the registry and a safe runner."""

from cortex_workers.tools.registry import Tool, ToolRegistry, default_registry, tool
from cortex_workers.tools.runner import ToolOutcome, run_tool

__all__ = ["Tool", "ToolOutcome", "ToolRegistry", "default_registry", "run_tool", "tool"]
