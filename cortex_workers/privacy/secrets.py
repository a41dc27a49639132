"""Secret detectors: detect-secrets' regex plugins, plus what they do not cover (whole PEM
private keys, `password=` style assignments, generic `sk-` API keys, the configured keys)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from detect_secrets.plugins.artifactory import ArtifactoryDetector
from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.discord import DiscordBotTokenDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.mailchimp import MailchimpDetector
from detect_secrets.plugins.npm import NpmDetector
from detect_secrets.plugins.openai import OpenAIDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector
from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
from detect_secrets.plugins.twilio import TwilioKeyDetector

from ..vocabulary import RedactionKind
from .values import Finding

PLUGINS: tuple[tuple[RedactionKind, RegexBasedDetector], ...] = (
    (RedactionKind.CLOUD_TOKEN, AWSKeyDetector()),
    (RedactionKind.CLOUD_TOKEN, AzureStorageKeyDetector()),
    (RedactionKind.VCS_TOKEN, GitHubTokenDetector()),
    (RedactionKind.VCS_TOKEN, GitLabTokenDetector()),
    (RedactionKind.API_TOKEN, OpenAIDetector()),
    (RedactionKind.API_TOKEN, StripeDetector()),
    (RedactionKind.API_TOKEN, SlackDetector()),
    (RedactionKind.API_TOKEN, SendGridDetector()),
    (RedactionKind.API_TOKEN, NpmDetector()),
    (RedactionKind.API_TOKEN, PypiTokenDetector()),
    (RedactionKind.API_TOKEN, TwilioKeyDetector()),
    (RedactionKind.API_TOKEN, DiscordBotTokenDetector()),
    (RedactionKind.API_TOKEN, MailchimpDetector()),
    (RedactionKind.API_TOKEN, SquareOAuthDetector()),
    (RedactionKind.API_TOKEN, TelegramBotTokenDetector()),
    (RedactionKind.API_TOKEN, ArtifactoryDetector()),
)

PEM_PRIVATE_KEY = re.compile(
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
    r"[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
)
GENERIC_API_KEY = re.compile(r"(?<![\w-])sk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}")
ASSIGNMENT = re.compile(
    r"(?i)\b(?:password|passwd|pwd|passphrase|secret|client_secret|api[_-]?key|apikey|"
    r"access[_-]?token|auth[_-]?token|private[_-]?key)\b[\"']?\s*(?::=|=>|=|:)\s*"
    r"(?:\"(?P<dq>[^\"\n]{3,})\"|'(?P<sq>[^'\n]{3,})'|(?P<bare>[^\s\"',;]{3,}))"
)


def _span(match: re.Match[str]) -> tuple[int, int]:
    """The secret's span: a long captured group (AWS secret keys), else the whole match."""
    if match.lastindex and len(match.group(match.lastindex) or "") >= 16:
        return match.span(match.lastindex)
    return match.span()


def plugin_findings(text: str) -> Iterator[Finding]:
    for kind, plugin in PLUGINS:
        for regex in plugin.denylist:
            for match in regex.finditer(text):
                start, end = _span(match)
                yield Finding(kind, start, end)


def jwt_findings(text: str) -> Iterator[Finding]:
    for regex in JwtTokenDetector.denylist:
        for match in regex.finditer(text):
            if JwtTokenDetector.is_formally_valid(match.group()):
                yield Finding(RedactionKind.JWT, *match.span())


def private_key_findings(text: str) -> Iterator[Finding]:
    for match in PEM_PRIVATE_KEY.finditer(text):
        yield Finding(RedactionKind.PRIVATE_KEY, *match.span())


def assignment_findings(text: str) -> Iterator[Finding]:
    """`password=…`, `api_key: "…"` and the like: the value only."""
    for match in ASSIGNMENT.finditer(text):
        group = next(g for g in ("dq", "sq", "bare") if match.group(g) is not None)
        if not match.group(group).startswith("["):  # already a placeholder
            yield Finding(RedactionKind.PASSWORD, *match.span(group))
    for match in GENERIC_API_KEY.finditer(text):
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


def secret_findings(text: str, known: tuple[str, ...] = ()) -> Iterator[Finding]:
    yield from known_findings(text, known)
    yield from private_key_findings(text)
    yield from jwt_findings(text)
    yield from plugin_findings(text)
    yield from assignment_findings(text)
