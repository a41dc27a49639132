"""How a model step ends (`turns.closing` writes it, with the step's record, in one statement).

`Commit` stores the answer (and what follows from it: tool steps, or the end of the turn);
`Retry` gives the step back for another attempt (a provider's retryable error, an anomaly's
retry or fallback); `Defer` waits out a rate limit without counting the attempt; `Fail` ends
the turn visibly; `Rollback` restores the session's last checkpoint; `Abandon` writes the
record only (the step is not ours any more, or its turn was cancelled while it ran).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..messages import Completion
from ..providers.registry import Route
from ..store.replies import ErrorDoc


@dataclass(frozen=True, slots=True)
class Commit:
    """The answer to store (past the depth cap: the notice, and the turn fails)."""

    completion: Completion
    route: Route
    latency_ms: int
    depth_exceeded: bool = False


@dataclass(frozen=True, slots=True)
class Retry:
    """The step again after `delay_s`, as attempt `next_attempt`."""

    delay_s: float
    error: ErrorDoc
    next_attempt: int


@dataclass(frozen=True, slots=True)
class Defer:
    """The step again after `delay_s`, as the same attempt (a rate limit's wait)."""

    delay_s: float


@dataclass(frozen=True, slots=True)
class Fail:
    """The turn ends `failed` with this error."""

    code: str
    message: str


@dataclass(frozen=True, slots=True)
class Rollback:
    """The session back at its last checkpoint, the turn `rolled_back` with this error."""

    error: ErrorDoc


@dataclass(frozen=True, slots=True)
class Abandon:
    """Nothing to end: write the record only."""


Outcome = Commit | Retry | Defer | Fail | Rollback | Abandon
