"""HTTP with retries: the policy both transports follow (`aio.transport`, and `sync.transport`
generated from it).

A request is retried after a 503, a 502/504 from a proxy in front, or a 429 (after its
`Retry-After`), and after a connection error when sending it again cannot do anything twice: the
request was never sent (connect errors), or it is a read, or it carries an `Idempotency-Key`, or
repeating it changes nothing (`resend_safe`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import httpx

from .errors import ConnectionFailed, error_for

RETRY_STATUSES = frozenset({429, 502, 503, 504})
MAX_RETRY_AFTER_S = 60.0
"""A `Retry-After` longer than this is not waited for: the error is raised."""
USER_AGENT = "cortex-workers-client"
DEFAULT_TIMEOUT_S = 60.0
DEFAULT_MAX_RETRIES = 5


Query: TypeAlias = dict[str, str | int]
"""A request's query parameters."""


@dataclass(frozen=True, slots=True)
class Call:
    """One API request."""

    method: str
    path: str
    json: Any = None
    params: Query | None = None
    headers: dict[str, str] = field(default_factory=dict)
    resend_safe: bool = False
    """Sending it twice has the effect of sending it once."""

    @property
    def replayable(self) -> bool:
        return (
            self.resend_safe
            or self.method in ("GET", "HEAD", "DELETE")
            or "Idempotency-Key" in self.headers
        )


def backoff_s(attempt: int) -> float:
    """Exponential, with jitter: about 0.25 s, 0.5 s, 1 s, … at most 8 s."""
    return float(min(8.0, 0.25 * 2**attempt) * (0.5 + random.random() / 2))


def retry_after_s(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def _body(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def raise_for(response: httpx.Response) -> None:
    """The typed error of an error response (its body already read)."""
    if response.status_code >= 400:
        raise error_for(response.status_code, _body(response), retry_after_s(response))


def delay_for(response: httpx.Response, attempt: int, max_retries: int) -> float | None:
    """How long to wait before retrying this response, or None to not retry it."""
    if response.status_code not in RETRY_STATUSES or attempt >= max_retries:
        return None
    after = retry_after_s(response)
    if after is None:
        return backoff_s(attempt)
    return after if after <= MAX_RETRY_AFTER_S else None


def delay_for_error(call: Call, exc: httpx.TransportError, attempt: int, max_retries: int) -> float:
    """How long to wait before resending after a connection error; raises when it must not."""
    unsent = isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout)
    if attempt >= max_retries or not (unsent or call.replayable):
        raise ConnectionFailed(f"{call.method} {call.path}: {type(exc).__name__}: {exc}") from exc
    return backoff_s(attempt)


def headers_for(api_key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}", "User-Agent": USER_AGENT}


def result_of(response: httpx.Response) -> Any:
    """The body of a final response (None when empty); raises the typed error of an error."""
    raise_for(response)
    return None if response.status_code == 204 or not response.content else response.json()
