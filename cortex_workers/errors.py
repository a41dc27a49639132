"""Errors, grouped by what the caller does with them.

- `ToolError`: shown to the model as an `is_error` tool result; the turn goes on.
- `RetryableError`: the step is retried with backoff (then the turn fails visibly).
- `TerminalError`: the turn fails at once with this code and message.
- `ConflictError` / `NotFound` / `InvalidRequest`: an API caller's problem, answered 409/404/422.
"""

from __future__ import annotations

from typing import Any


class CortexError(Exception):
    """Base of all product errors; `code` is stable, `message` says what to do next."""

    code = "error"

    def __init__(self, message: str, *, code: str | None = None, details: Any = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.details = details


class ToolError(CortexError):
    """A tool call that failed; the model reads the message and may correct itself."""

    code = "tool_error"


class RetryableError(CortexError):
    """A transient failure (rate limit, 5xx, timeout, connection): retry the step."""

    code = "retryable"

    def __init__(
        self, message: str, *, code: str | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message, code=code)
        self.retry_after = retry_after


class TerminalError(CortexError):
    """A failure no retry will fix: the turn fails with this code and message."""

    code = "failed"


class ConflictError(CortexError):
    """The request conflicts with current state (busy session, finished turn)."""

    code = "conflict"


class NotFound(CortexError):
    """No such resource for this tenant."""

    code = "not_found"


class QuotaExceeded(CortexError):
    """A tenant is at one of its quotas (schedules, webhooks, open streams): answered 429,
    with `Retry-After` when the quota frees by itself (a stream's slot lapses)."""

    code = "quota_exceeded"

    def __init__(
        self, message: str, *, details: Any = None, retry_after_s: int | None = None
    ) -> None:
        super().__init__(message, details=details)
        self.retry_after_s = retry_after_s


class TooLarge(CortexError):
    """A part of a request over its size limit (an image): answered 413."""

    code = "payload_too_large"


class InvalidRequest(CortexError):
    """Well-formed JSON that the product cannot accept."""

    code = "invalid_request"
