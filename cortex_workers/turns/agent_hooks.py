"""Where other capabilities meet sub-agents (see AGENTS-HOOKS.md at the repository root for
the contract): what a child turn's context adds about its parent session, and what is done
with a child's final answer. Both are no-ops until a capability fills them."""

from __future__ import annotations

import uuid

from ..store.db import Executor


def child_context(db: Executor, parent_session_id: uuid.UUID) -> str | None:
    """Text added to a sub-agent's system prompt, from its parent session (e.g. the
    whiteboard's summary when the parent session has one); None for nothing."""
    return None


def child_answered(db: Executor, parent_session_id: uuid.UUID, answer: str) -> None:
    """A sub-agent's final answer, in the transaction that ends its task under the parent
    session's lock (e.g. to apply a trailing `whiteboard_suggestion`)."""
    return None
