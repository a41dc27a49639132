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

    def copy(self) -> Placeholders:
        return Placeholders(dict(self.by_value), Counter(self.numbers), Counter(self.counts))

    def adopt(self, other: Placeholders) -> None:
        """Take `other`'s state (a copy of this one that went on)."""
        self.by_value, self.numbers, self.counts = other.by_value, other.numbers, other.counts

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


PASSES = 4
"""Scans of one text at most (see `_redact_text`)."""


def _redact_text(run: _Run, text: str, names: Placeholders) -> str:
    """The text with its findings replaced, to a fixed point: a placeholder changes what is
    around it (`a::b` becomes `[A]::[B]`, and that `::` reads as an address), so the result is
    scanned again, and what that scan finds outside the findings so far is widened to the
    placeholders it touches, mapped back onto the text and merged with them, until a scan finds
    nothing new. A text still changing after `PASSES` scans is not sent (`RedactionFailed`);
    the redaction's deadline bounds every scan."""
    found = findings(run, text) if text else []
    if not found:
        return text
    for scans in range(2, PASSES + 1):
        trial = names.copy()  # kept only if this replacement is the last
        redacted, pieces = _replace(text, found, trial)
        piece_starts = [p.start for p in pieces]
        again = [_back(pieces, piece_starts, f) for f in findings(run, redacted)]
        starts = [o.start for o in found]
        new = [f for f in again if not _covered(found, starts, f)]
        if not new:
            names.adopt(trial)
            return redacted
        if scans == PASSES:
            break
        found = _merged(found, new)
    raise RedactionFailed(f"the redacted text still changed after {PASSES} scans")


@dataclass(frozen=True, slots=True)
class _Piece:
    """A stretch of the redacted text and where it came from: `text[src_start:src_end]`,
    copied (`placeholder` False) or replaced by a placeholder."""

    start: int
    end: int
    src_start: int
    src_end: int
    placeholder: bool


def _replace(text: str, found: list[Finding], names: Placeholders) -> tuple[str, list[_Piece]]:
    out: list[str] = []
    pieces: list[_Piece] = []
    last = at = 0
    for f in found:
        for part, src, is_ph in (
            (text[last : f.start], (last, f.start), False),
            (names.of(f.kind, text[f.start : f.end]), (f.start, f.end), True),
        ):
            if part:
                out.append(part)
                pieces.append(_Piece(at, at + len(part), *src, is_ph))
                at += len(part)
        last = f.end
    if last < len(text):
        out.append(text[last:])
        pieces.append(_Piece(at, at + len(text) - last, last, len(text), False))
    return "".join(out), pieces


def _back(pieces: list[_Piece], starts: list[int], f: Finding) -> Finding:
    """A finding in the redacted text as a span of the original: a placeholder it touches
    is taken whole (`starts`: the pieces' starts)."""
    first = pieces[bisect.bisect_right(starts, f.start) - 1]
    last = pieces[bisect.bisect_right(starts, f.end - 1) - 1]
    start = first.src_start if first.placeholder else first.src_start + f.start - first.start
    end = last.src_end if last.placeholder else last.src_start + f.end - last.start
    return Finding(f.kind, start, end)


def _covered(found: list[Finding], starts: list[int], f: Finding) -> bool:
    """Whether `f` lies within one of `found` (sorted, not overlapping; `starts` theirs)."""
    i = bisect.bisect_right(starts, f.start) - 1
    return i >= 0 and f.end <= found[i].end


def _merged(earlier: list[Finding], later: list[Finding]) -> list[Finding]:
    """One finding per run of overlapping spans, of the kind of its first (an earlier scan's
    finding before a later one's at the same start)."""
    merged: list[Finding] = []
    for f in sorted(earlier + later, key=lambda f: f.start):
        if merged and f.start < merged[-1].end:
            top = merged[-1]
            merged[-1] = Finding(top.kind, top.start, max(top.end, f.end))
        else:
            merged.append(f)
    return merged


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
