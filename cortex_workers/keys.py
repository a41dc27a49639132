"""Every Redis key the product uses, in one place."""

from __future__ import annotations

import uuid

from .vocabulary import RateLimitKind

PREFIX = "cortex"


def stream_key(turn_id: uuid.UUID | str) -> str:
    """A turn's event stream."""
    return f"{PREFIX}:turn:{turn_id}:events"


def cancel_key(turn_id: uuid.UUID | str) -> str:
    """Set while a turn is being cancelled; running model steps poll it between tokens."""
    return f"{PREFIX}:turn:{turn_id}:cancel"


def rate_key(scope: str, kind: RateLimitKind) -> str:
    """A sliding-window rate limit (requests or tokens per minute) of a provider or
    provider:model."""
    return f"{PREFIX}:rate:{scope}:{kind}"


def failures_key(provider: str) -> str:
    """Recent retryable failures of a provider (a sorted set of timestamps)."""
    return f"{PREFIX}:provider:{provider}:failures"


def cooldown_key(provider: str) -> str:
    """Present while a provider is cooling down; its value is the reason."""
    return f"{PREFIX}:provider:{provider}:cooldown"


def notices_key(session_id: uuid.UUID | str) -> str:
    """A session's events that belong to no turn (proposal decisions)."""
    return f"{PREFIX}:session:{session_id}:notices"
