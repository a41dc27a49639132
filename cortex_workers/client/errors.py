"""Typed exceptions for the API's error shape `{"error": {"code", "message", "details"}}`.

Each exception carries the API's `code`, `message`, `details` and the HTTP `status`; the class
says what kind of failure it is, so callers catch `SessionBusy` or `NotFound` rather than
comparing codes.
"""

from __future__ import annotations

from typing import Any, NotRequired

from pydantic import ConfigDict, JsonValue, with_config
from typing_extensions import TypedDict


@with_config(ConfigDict(extra="allow"))  # a newer server's fields are kept
class ErrorDoc(TypedDict):
    """An error as the API sends it: the body of an error response, and the `error` of a turn,
    a step, a job or a batch's result (the server's `cortex_workers.messages.ErrorDoc`)."""

    code: str
    message: str
    details: NotRequired[JsonValue]


class CortexClientError(Exception):
    """Base of every error the client raises."""


class ConnectionFailed(CortexClientError):
    """The API could not be reached (after the client's retries)."""


class APIError(CortexClientError):
    """The API answered with an error."""

    def __init__(
        self,
        message: str,
        *,
        code: str,
        status: int,
        details: Any = None,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.code = code
        self.message = message
        self.status = status
        self.details = details
        self.retry_after_s = retry_after_s


class BadRequest(APIError):
    """400."""


class Unauthorized(APIError):
    """401: a missing, unknown or revoked API key."""


class PaymentRequired(APIError):
    """402."""


class BudgetExhausted(PaymentRequired):
    """402 `budget_exhausted`: `details` has `scope`, `limit_usd`, `spent_usd`, `resets_at`."""


class Forbidden(APIError):
    """403."""


class NotFound(APIError):
    """404: no such session, turn, proposal, job, batch or webhook for this tenant."""


class Conflict(APIError):
    """409."""


class SessionBusy(Conflict):
    """409 `session_busy`: `if_busy="reject"` on a session running another turn."""


class TurnFinished(Conflict):
    """409 `turn_finished`: cancelling a turn that already ended."""


class ProposalDecided(Conflict):
    """409 `proposal_decided`: the proposal was already decided the other way, or expired."""


class SessionTokenCap(Conflict):
    """409 `session_token_cap`: the session used its token cap."""


class PayloadTooLarge(APIError):
    """413."""


class InvalidRequest(APIError):
    """422: the request cannot be accepted (`validation_error`, `unknown_tool`, …)."""


class IdempotencyKeyReused(InvalidRequest):
    """422 `idempotency_key_reused`: the key was used with a different request."""


class RateLimited(APIError):
    """429: `retry_after_s` says when to try again."""


class UserRateLimited(RateLimited):
    """429 `user_rate_limited`: the end user's hourly turns are used up."""


class ServiceUnavailable(APIError):
    """503: a backing service is down; retry soon."""


class InternalServerError(APIError):
    """500 or another 5xx."""


class TurnFailed(CortexClientError):
    """The turn `ask` waited for ended `failed`; `code` and `message` are its `error` event's."""

    def __init__(self, turn_id: str, code: str, message: str) -> None:
        super().__init__(f"turn {turn_id} failed: {code}: {message}")
        self.turn_id = turn_id
        self.code = code
        self.message = message


class TurnCancelled(CortexClientError):
    """The turn `ask` waited for was cancelled."""

    def __init__(self, turn_id: str) -> None:
        super().__init__(f"turn {turn_id} was cancelled")
        self.turn_id = turn_id


class JobFailed(CortexClientError):
    """An LLM function's job ended `failed`; `error` is the job's, else each attempt's."""

    def __init__(self, job_id: str, error: ErrorDoc | list[str | None] | None) -> None:
        super().__init__(f"job {job_id} failed: {error}")
        self.job_id = job_id
        self.error = error


BY_CODE: dict[str, type[APIError]] = {
    "budget_exhausted": BudgetExhausted,
    "session_busy": SessionBusy,
    "turn_finished": TurnFinished,
    "proposal_decided": ProposalDecided,
    "session_token_cap": SessionTokenCap,
    "idempotency_key_reused": IdempotencyKeyReused,
    "user_rate_limited": UserRateLimited,
}
BY_STATUS: dict[int, type[APIError]] = {
    400: BadRequest,
    401: Unauthorized,
    402: PaymentRequired,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: PayloadTooLarge,
    422: InvalidRequest,
    429: RateLimited,
    503: ServiceUnavailable,
}


def error_for(status: int, body: Any, retry_after_s: float | None = None) -> APIError:
    """The exception for an error response: by its code first, then by its status."""
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        error = {}
    code = str(error.get("code") or f"http_{status}")
    message = str(error.get("message") or f"the API answered {status}")
    default = InternalServerError if status >= 500 else APIError
    cls = BY_CODE.get(code) or BY_STATUS.get(status, default)
    return cls(
        message, code=code, status=status, details=error.get("details"), retry_after_s=retry_after_s
    )
