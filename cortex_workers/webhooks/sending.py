"""Sending one signed message to a webhook URL through the plugin tools' SSRF guard.

Loopback and private hosts are refused unless the operator lists the URL's host in
`[webhooks] allowed_private_hosts`; cloud metadata and link-local addresses are always
refused. The URL is checked when the webhook is created and again before every attempt
(a DNS answer may have changed), and the connection is pinned to the checked address.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass

from ..tools.http_guard import (
    BlockedAddress,
    check_address,
    guarded_request,
    parse_url,
    resolve_checked,
)
from .signing import SignedMessage

MAX_RESPONSE_BYTES = 64 * 1024
"""A receiver's answer is read up to this size (its body is not kept)."""


class WebhookUrlRefused(ValueError):
    """The URL may not receive webhooks: `code` says why (`invalid_webhook_url` or
    `webhook_url_blocked`)."""

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.code = code


def _allow_private(host: str, allowed: Collection[str]) -> bool:
    return host.lower().strip("[]") in {h.lower().strip("[]") for h in allowed}


def check_url(url: str, *, allowed_private_hosts: Collection[str]) -> None:
    """WebhookUrlRefused unless `url` is an http(s) URL whose host resolves only to
    addresses a webhook may reach."""
    try:
        parsed = parse_url(url)
    except ValueError as exc:
        raise WebhookUrlRefused(str(exc), code="invalid_webhook_url") from None
    host = parsed.raw_host.decode("ascii")
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        resolve_checked(host, port, allow_private=_allow_private(host, allowed_private_hosts))
    except BlockedAddress as exc:
        message = f"refusing {host} ({exc.address}): {exc.reason}"
        if check_address(exc.address, allow_private=True) is None:
            message += "; an operator may list the host in [webhooks] allowed_private_hosts"
        raise WebhookUrlRefused(message, code="webhook_url_blocked") from None
    except ConnectionError as exc:
        raise WebhookUrlRefused(str(exc), code="invalid_webhook_url") from None


@dataclass(frozen=True, slots=True)
class SendResult:
    """What one attempt got: the status code, or the error that stopped it."""

    status_code: int | None
    error: str | None
    duration_ms: int

    @property
    def delivered(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


def send(
    url: str, message: SignedMessage, *, timeout_s: float, allowed_private_hosts: Collection[str]
) -> SendResult:
    """POST the message once; never raises for what the network or the receiver does."""
    started = time.monotonic()

    def took() -> int:
        return int((time.monotonic() - started) * 1000)

    try:
        check_url(url, allowed_private_hosts=allowed_private_hosts)
        answer = guarded_request(
            "POST",
            url,
            content=message.body,
            headers=message.headers,
            timeout_s=timeout_s,
            allow_private=_allow_private(
                parse_url(url).raw_host.decode("ascii"), allowed_private_hosts
            ),
            max_body=MAX_RESPONSE_BYTES,
        )
    except WebhookUrlRefused as exc:
        return SendResult(None, f"{exc.code}: {exc}", took())
    except Exception as exc:  # timeout, connection, oversized answer: a failed attempt
        return SendResult(None, f"{type(exc).__name__}: {exc}", took())
    error = None if 200 <= answer.status < 300 else f"HTTP {answer.status} {answer.reason}"
    return SendResult(answer.status, error, took())
