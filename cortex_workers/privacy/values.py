"""The values of redaction: the policy in force, what was found, and what was replaced."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import regex

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
class Deadline:
    """The time one redaction may take: every pattern runs with what is left of it as the
    `regex` module's `timeout`, so no single match can run past it."""

    at: float

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        return cls(time.monotonic() + seconds)

    def remaining(self) -> float:
        left = self.at - time.monotonic()
        if left <= 0:
            raise RedactionFailed("timed out")
        return left

    def finditer(self, pattern: regex.Pattern[str], text: str) -> Iterator[regex.Match[str]]:
        """The matches of `pattern`, found within what is left of the deadline (all of them
        first: a timeout raises before any finding is used). Raises `RedactionFailed`."""
        try:
            matches = list(pattern.finditer(text, timeout=self.remaining()))
        except TimeoutError as exc:
            raise RedactionFailed("timed out") from exc
        return iter(matches)


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


@dataclass(frozen=True, slots=True)
class RedactedValue:
    """A redacted JSON-like value, its counts per kind and its restoring mapping."""

    value: Any
    counts: dict[str, int]
    restore: dict[str, str] = field(repr=False)


class RedactionFailed(TerminalError):
    """Redaction raised or timed out: nothing may be sent. The message never holds a value."""

    def __init__(self, reason: str) -> None:
        super().__init__(
            f"redaction failed ({reason}): nothing was sent to the provider",
            code=REDACTION_FAILED,
        )
