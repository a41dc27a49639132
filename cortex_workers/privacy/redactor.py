"""Replace secrets and PII with placeholders like `[EMAIL_1]`, the same value always by the
same placeholder within one redaction (a turn's context, redacted as a whole)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import regex

from ..messages import Message, ToolCall
from .pii import pii_findings
from .secrets import secret_findings
from .values import Finding, PrivacyPolicy, Redacted, RedactionFailed


@dataclass
class Placeholders:
    """Value -> placeholder, numbered per kind in order of first appearance."""

    by_value: dict[tuple[str, str], str] = field(default_factory=dict)
    numbers: Counter[str] = field(default_factory=Counter)
    counts: Counter[str] = field(default_factory=Counter)

    def of(self, kind: str, value: str) -> str:
        kind = str(kind)
        self.counts[kind] += 1
        key = (kind, value)
        if key not in self.by_value:
            self.numbers[kind] += 1
            self.by_value[key] = f"[{placeholder_name(kind)}_{self.numbers[kind]}]"
        return self.by_value[key]

    def restore_map(self) -> dict[str, str]:
        return {ph: value for (_, value), ph in self.by_value.items()}


def placeholder_name(kind: str) -> str:
    return regex.sub(r"[^A-Z0-9]+", "_", kind.upper()).strip("_") or "REDACTED"


@dataclass(frozen=True, slots=True)
class _Run:
    policy: PrivacyPolicy
    deadline: float
    compiled: tuple[tuple[str, regex.Pattern[str]], ...]

    def remaining(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise RedactionFailed("timed out")
        return left


def _operator_findings(run: _Run, text: str) -> Iterable[Finding]:
    for kind, pattern in run.compiled:
        try:
            matches = list(pattern.finditer(text, timeout=run.remaining()))
        except TimeoutError as exc:
            raise RedactionFailed("timed out") from exc
        for match in matches:
            yield Finding(kind, *match.span())


def findings(run: _Run, text: str) -> list[Finding]:
    """Non-overlapping findings, in text order (an earlier detector wins an overlap)."""
    found: list[Finding] = []
    sources: list[Iterable[Finding]] = []
    if run.policy.redact_secrets:
        sources.append(secret_findings(text, run.policy.known_secrets))
    sources.append(_operator_findings(run, text))
    if run.policy.redact_pii:
        sources.append(pii_findings(text, run.policy.phone_region))
    for source in sources:
        for f in source:
            if f.end > f.start and all(f.end <= g.start or f.start >= g.end for g in found):
                found.append(f)
        run.remaining()
    return sorted(found, key=lambda f: f.start)


def _redact_text(run: _Run, text: str, names: Placeholders) -> str:
    if not text:
        return text
    out, last = [], 0
    for f in findings(run, text):
        out.append(text[last : f.start])
        out.append(names.of(f.kind, text[f.start : f.end]))
        last = f.end
    out.append(text[last:])
    return "".join(out)


def _redact_value(run: _Run, value: Any, names: Placeholders) -> Any:
    """Strings inside JSON-like tool call arguments."""
    if isinstance(value, str):
        return _redact_text(run, value, names)
    if isinstance(value, list):
        return [_redact_value(run, v, names) for v in value]
    if isinstance(value, dict):
        return {k: _redact_value(run, v, names) for k, v in value.items()}
    return value


def _redact_message(run: _Run, message: Message, names: Placeholders) -> Message:
    calls = tuple(
        ToolCall(c.id, c.name, _redact_value(run, c.arguments, names)) for c in message.tool_calls
    )
    return replace(message, content=_redact_text(run, message.content, names), tool_calls=calls)


def _start(policy: PrivacyPolicy) -> _Run:
    try:
        compiled = tuple((k, regex.compile(p)) for k, p in policy.patterns.items())
    except regex.error as exc:
        raise RedactionFailed("an operator pattern does not compile") from exc
    return _Run(policy, time.monotonic() + policy.timeout_s, compiled)


def redact_messages(messages: Sequence[Message], policy: PrivacyPolicy) -> Redacted:
    """The messages with every finding replaced. Raises `RedactionFailed` (and only that):
    whatever goes wrong, the caller sends nothing."""
    try:
        run = _start(policy)
        names = Placeholders()
        out = tuple(_redact_message(run, m, names) for m in messages)
    except RedactionFailed:
        raise
    except Exception as exc:  # fail closed; the exception text may quote the value
        raise RedactionFailed(f"the redactor raised {type(exc).__name__}") from None
    return Redacted(out, dict(names.counts), names.restore_map())


def redact_text(text: str, policy: PrivacyPolicy) -> Redacted:
    """One text, redacted (`Redacted.text`)."""
    return redact_messages([Message(role="user", content=text)], policy)
