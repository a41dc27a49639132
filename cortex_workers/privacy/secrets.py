"""Secret detectors: detect-secrets' regex plugins, plus what they do not cover (whole PEM
private keys, `password=` style assignments, generic `sk-` API keys, the configured keys).

Every pattern runs on the `regex` module with what is left of the redaction's deadline as its
`timeout` (`Deadline.finditer`): text is untrusted, and no match may run unbounded. The
plugins' patterns whose matching is quadratic on hostile text (npm's `//.+/:_authToken`, the
JWT's, OpenAI's `sk-…T3BlbkFJ`) are replaced by linear equivalents that cannot start inside
a run of their own characters."""

from __future__ import annotations

from collections.abc import Iterator

import regex
from detect_secrets.plugins.artifactory import ArtifactoryDetector
from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.discord import DiscordBotTokenDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.mailchimp import MailchimpDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector
from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
from detect_secrets.plugins.twilio import TwilioKeyDetector

from ..vocabulary import RedactionKind
from .values import Deadline, Finding

NPM_TOKEN = regex.compile(r":_authToken=[ \t]*(npm_[A-Za-z0-9]{16,}|[A-Fa-f0-9-]{36})")
"""npm's `//registry/:_authToken=…` (the token only; detect-secrets' `//.+/` is quadratic)."""
OPENAI_KEY = regex.compile(
    r"(?<![A-Za-z0-9_-])sk-[A-Za-z0-9_-]*?[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}"
)
JWT = regex.compile(
    r"(?<![A-Za-z0-9_=-])eyJ[A-Za-z0-9_=-]+\.[A-Za-z0-9_=-]+(?:\.[A-Za-z0-9_+/=-]*)?"
)
"""A JWT that cannot start inside a run of its characters (`eyJeyJ…` stays linear)."""


def _compiled(plugin: RegexBasedDetector) -> tuple[regex.Pattern[str], ...]:
    return tuple(regex.compile(p.pattern, p.flags) for p in plugin.denylist)


def _plugins() -> tuple[tuple[RedactionKind, regex.Pattern[str]], ...]:
    out: list[tuple[RedactionKind, regex.Pattern[str]]] = []
    for kind, detector in (
        (RedactionKind.CLOUD_TOKEN, AWSKeyDetector()),
        (RedactionKind.CLOUD_TOKEN, AzureStorageKeyDetector()),
        (RedactionKind.VCS_TOKEN, GitHubTokenDetector()),
        (RedactionKind.VCS_TOKEN, GitLabTokenDetector()),
        (RedactionKind.API_TOKEN, StripeDetector()),
        (RedactionKind.API_TOKEN, SlackDetector()),
        (RedactionKind.API_TOKEN, SendGridDetector()),
        (RedactionKind.API_TOKEN, PypiTokenDetector()),
        (RedactionKind.API_TOKEN, TwilioKeyDetector()),
        (RedactionKind.API_TOKEN, DiscordBotTokenDetector()),
        (RedactionKind.API_TOKEN, MailchimpDetector()),
        (RedactionKind.API_TOKEN, SquareOAuthDetector()),
        (RedactionKind.API_TOKEN, TelegramBotTokenDetector()),
        (RedactionKind.API_TOKEN, ArtifactoryDetector()),
    ):
        out += [(kind, pattern) for pattern in _compiled(detector)]
    out += [(RedactionKind.API_TOKEN, OPENAI_KEY), (RedactionKind.API_TOKEN, NPM_TOKEN)]
    return tuple(out)


PLUGINS = _plugins()

PEM_PRIVATE_KEY = regex.compile(
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
    r"[^-]*+(?:-(?!----)[^-]*+)*+-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
)
"""The body stops at the next `-----` (a header without its end line costs one scan)."""
GENERIC_API_KEY = regex.compile(r"(?<![\w-])sk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}")
ASSIGNMENT = regex.compile(
    r"(?i)\b(?:password|passwd|pwd|passphrase|secret|client_secret|api[_-]?key|apikey|"
    r"access[_-]?token|auth[_-]?token|private[_-]?key)\b[\"']?[ \t]*+(?::=|=>|=|:)[ \t]*+"
    r"(?:\"(?P<dq>[^\"\n]{3,})\"|'(?P<sq>[^'\n]{3,})'|(?P<bare>[^\s\"',;]{3,}))"
)


def _span(match: regex.Match[str]) -> tuple[int, int]:
    """The secret's span: a long captured group (AWS secret keys), else the whole match."""
    index = match.lastindex if match.lastindex else 0
    if index and len(match.group(index) or "") < 16:
        index = 0
    start, end = match.span(index)
    return int(start), int(end)


def plugin_findings(text: str, deadline: Deadline) -> Iterator[Finding]:
    for kind, pattern in PLUGINS:
        for match in deadline.finditer(pattern, text):
            start, end = _span(match)
            yield Finding(kind, start, end)


def jwt_findings(text: str, deadline: Deadline) -> Iterator[Finding]:
    for match in deadline.finditer(JWT, text):
        if JwtTokenDetector.is_formally_valid(match.group()):
            yield Finding(RedactionKind.JWT, *match.span())


def private_key_findings(text: str, deadline: Deadline) -> Iterator[Finding]:
    for match in deadline.finditer(PEM_PRIVATE_KEY, text):
        yield Finding(RedactionKind.PRIVATE_KEY, *match.span())


def assignment_findings(text: str, deadline: Deadline) -> Iterator[Finding]:
    """`password=…`, `api_key: "…"` and the like: the value only."""
    for match in deadline.finditer(ASSIGNMENT, text):
        group = next(g for g in ("dq", "sq", "bare") if match.group(g) is not None)
        if not match.group(group).startswith("["):  # already a placeholder
            yield Finding(RedactionKind.PASSWORD, *match.span(group))
    for match in deadline.finditer(GENERIC_API_KEY, text):
        yield Finding(RedactionKind.API_TOKEN, *match.span())


def known_findings(text: str, known: tuple[str, ...]) -> Iterator[Finding]:
    """Every occurrence of a configured provider key."""
    for value in known:
        if len(value) < 6:
            continue
        start = text.find(value)
        while start != -1:
            yield Finding(RedactionKind.PROVIDER_KEY, start, start + len(value))
            start = text.find(value, start + len(value))


def secret_findings(
    text: str, known: tuple[str, ...] = (), *, deadline: Deadline | None = None
) -> Iterator[Finding]:
    """Raises `RedactionFailed` when a pattern runs past `deadline` (default: 2 s)."""
    deadline = deadline or Deadline.after(2.0)
    yield from known_findings(text, known)
    yield from private_key_findings(text, deadline)
    yield from jwt_findings(text, deadline)
    yield from plugin_findings(text, deadline)
    yield from assignment_findings(text, deadline)
