"""The whiteboard of a coordinator session: mission, focus, progress, blockers, decisions and
recent updates, kept in Postgres (`store.whiteboard`), written by the coordinator's tools and
by its sub-agents' suggestions, and shown to all of them as a short summary in their context.
"""

from .suggestion import apply_whiteboard_suggestion, split_suggestion
from .summary import board_json, summarize, whiteboard_summary
from .tools import WHITEBOARD_TOOLS, offered_to, register_whiteboard_tools

__all__ = [
    "WHITEBOARD_TOOLS",
    "apply_whiteboard_suggestion",
    "board_json",
    "offered_to",
    "register_whiteboard_tools",
    "split_suggestion",
    "summarize",
    "whiteboard_summary",
]
