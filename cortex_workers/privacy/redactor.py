"""Replace secrets and PII with placeholders like `[EMAIL_1]`, the same value always by the
same placeholder within one redaction (a turn's context, redacted as a whole)."""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import regex

from ..messages import Message, ToolCall
from .pii import pii_findings
from .secrets import secret_findings
from .values import Deadline, Finding, PrivacyPolicy, Redacted, RedactedValue, RedactionFailed


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
    deadline: Deadline
    """Every pattern, built-in or the operator's, runs with what is left of it as timeout."""
    compiled: tuple[tuple[str, regex.Pattern[str]], ...]

    def remaining(self) -> float:
        return self.deadline.remaining()


def _operator_findings(run: _Run, text: str) -> Iterable[Finding]:
    for kind, pattern in run.compiled:
        for match in run.deadline.finditer(pattern, text):
            yield Finding(kind, *match.span())


@dataclass
class _Taken:
    """Non-overlapping findings kept sorted by start: each new one is checked against its two
    neighbours (a bisection), so many findings cost n log n, not n squared."""

    starts: list[int] = field(default_factory=list)
    found: list[Finding] = field(default_factory=list)

    def add(self, f: Finding) -> None:
        if f.end <= f.start:
            return
        i = bisect.bisect_right(self.starts, f.start)
        if i > 0 and self.found[i - 1].end > f.start:
            return
        if i < len(self.found) and self.found[i].start < f.end:
            return
        self.starts.insert(i, f.start)
        self.found.insert(i, f)


def findings(run: _Run, text: str) -> list[Finding]:
    """Non-overlapping findings, in text order (an earlier detector wins an overlap)."""
    taken = _Taken()
    sources: list[Iterable[Finding]] = []
    if run.policy.redact_secrets:
        sources.append(secret_findings(text, run.policy.known_secrets, deadline=run.deadline))
    sources.append(_operator_findings(run, text))
    if run.policy.redact_pii:
        sources.append(pii_findings(text, run.policy.phone_region, deadline=run.deadline))
    for source in sources:
        for f in source:
            taken.add(f)
        run.remaining()
    return taken.found


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
    return _Run(policy, Deadline.after(policy.timeout_s), compiled)


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


def redact_value(value: Any, policy: PrivacyPolicy) -> RedactedValue:
    """The strings inside a JSON-like value (an agent's input) with every finding replaced.
    Raises `RedactionFailed` (and only that), as `redact_messages` does."""
    try:
        run = _start(policy)
        names = Placeholders()
        out = _redact_value(run, value, names)
    except RedactionFailed:
        raise
    except Exception as exc:  # fail closed; the exception text may quote the value
        raise RedactionFailed(f"the redactor raised {type(exc).__name__}") from None
    return RedactedValue(out, dict(names.counts), names.restore_map())


def redact_text(text: str, policy: PrivacyPolicy) -> Redacted:
    """One text, redacted (`Redacted.text`)."""
    return redact_messages([Message(role="user", content=text)], policy)
