"""Where the whiteboard meets sub-agents: a child turn's context shows its parent session's
whiteboard, and a child's final answer may end with a `whiteboard_suggestion`, applied to the
parent's whiteboard (see docs/agents.md)."""

from __future__ import annotations

import uuid

from ...store.db import Executor
from ...whiteboard import apply_whiteboard_suggestion


def child_answered(db: Executor, parent_session_id: uuid.UUID, answer: str, *, agent: str) -> str:
    """A sub-agent's final answer, in the transaction that ends its task under the parent
    session's lock: its trailing `whiteboard_suggestion` applied; returns the answer without
    it (what the parent reads)."""
    return apply_whiteboard_suggestion(db, parent_session_id, answer, source=f"agent:{agent}")
