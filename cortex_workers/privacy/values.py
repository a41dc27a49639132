"""The values of redaction: the policy in force, what was found, and what was replaced."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..errors import TerminalError
from ..messages import Message

REDACTION_FAILED = "redaction_failed"


@dataclass(frozen=True, slots=True)
class PrivacyPolicy:
    """What to redact before a call to a non-local provider (`[llm.privacy]`)."""

    redact_secrets: bool = True
    redact_pii: bool = False
    restore: bool = True
    patterns: Mapping[str, str] = field(default_factory=dict)
    """Operator patterns: kind name -> regular expression (always applied)."""
    known_secrets: tuple[str, ...] = field(default=(), repr=False)
    """Values always redacted as `provider_key` (the configured provider keys)."""
    timeout_s: float = 2.0
    """A redaction that takes longer fails (closed)."""
    phone_region: str = "US"
    """How phone numbers written without a country code are read."""

    @property
    def active(self) -> bool:
        return self.redact_secrets or self.redact_pii or bool(self.patterns)


@dataclass(frozen=True, slots=True)
class Finding:
    """One value to replace: `text[start:end]`, of `kind`."""

    kind: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Redacted:
    """Redacted text or messages, how many values of each kind were replaced, and the
    placeholder -> original mapping that restores them (never logged)."""

    messages: tuple[Message, ...]
    counts: dict[str, int]
    restore: dict[str, str] = field(repr=False)

    @property
    def text(self) -> str:
        """The redacted text, when a single text was redacted."""
        return self.messages[0].content if self.messages else ""


class RedactionFailed(TerminalError):
    """Redaction raised or timed out: nothing may be sent. The message never holds a value."""

    def __init__(self, reason: str) -> None:
        super().__init__(
            f"redaction failed ({reason}): nothing was sent to the provider",
            code=REDACTION_FAILED,
        )
