"""The error shape `{"error": {"code", "message", "details"}}` for every failure."""

from __future__ import annotations

import logging
from typing import Any, TypedDict

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException

from ..budget import BudgetExhausted, UserRateLimited
from ..errors import (
    ConflictError,
    CortexError,
    InvalidRequest,
    NotFound,
    QuotaExceeded,
    TooLarge,
)
from ..messages import ErrorDoc

log = logging.getLogger(__name__)

STATUS_CODES = {
    400: "bad_request",
    401: "unauthorized",
    402: "payment_required",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "validation_error",
    429: "rate_limited",
    503: "unavailable",
}


class RateLimited(CortexError):
    """The tenant is over a per-minute submission limit: answered 429 with `Retry-After`."""

    code = "rate_limited"

    def __init__(self, message: str, *, retry_after_s: int, limit_per_minute: int) -> None:
        super().__init__(
            message,
            details={"retry_after_s": retry_after_s, "limit_per_minute": limit_per_minute},
        )
        self.retry_after_s = retry_after_s
        """Whole seconds, at least 1, until a submission can be accepted."""


def error_response(
    status: int, code: str, message: str, details: Any = None, headers: dict[str, str] | None = None
) -> JSONResponse:
    error: ErrorDoc = {"code": code, "message": message, "details": details}
    return JSONResponse(
        {"error": error},
        status_code=status,
        headers=headers,
    )


def _status_of(exc: CortexError) -> int:
    if isinstance(exc, NotFound):
        return 404
    if isinstance(exc, ConflictError):
        return 409
    if isinstance(exc, InvalidRequest):
        return 422
    if isinstance(exc, QuotaExceeded):
        return 429
    if isinstance(exc, TooLarge):
        return 413
    return 400


class FieldError(TypedDict):
    """One problem of a request that failed validation (a 422's `details` lists them)."""

    loc: list[str | int]
    """Where: `body`, `query`, `path` or `header`, then field names and list indexes."""
    msg: str
    type: str


def _clean(errors: list[Any]) -> list[FieldError]:
    """Pydantic's errors reduced to where, what and which kind: `input` would echo the request
    back, and `ctx` may hold values JSON cannot carry."""
    return [
        FieldError(loc=list(e.get("loc", ())), msg=e.get("msg", ""), type=e.get("type", ""))
        for e in errors
    ]


def _not_json(content_type: str | None) -> str | None:
    """The request's media type when it is given and is not JSON (a form, plain text), else
    None: FastAPI reads only a JSON body, so such a body fails validation as a whole."""
    if not content_type:
        return None
    media = content_type.split(";", 1)[0].strip().lower()
    if media == "application/json" or media.endswith("+json"):
        return None
    return media[:100]


async def _validation(request: Request, exc: Exception) -> JSONResponse:
    """A 422 naming the first problem; for a body not sent as JSON, its Content-Type."""
    assert isinstance(exc, RequestValidationError)
    errors = _clean(list(exc.errors()))
    first = errors[0] if errors else FieldError(loc=[], msg="invalid request", type="")
    where = ".".join(str(p) for p in first["loc"])
    message = f"{where}: {first['msg']}"
    wrong_type = _not_json(request.headers.get("content-type"))
    if wrong_type is not None and any(e["loc"][:1] == ["body"] for e in errors):
        message = (
            f"the body must be JSON, sent with Content-Type: application/json; this one "
            f"came as Content-Type: {wrong_type} ({message})"
        )
    return error_response(422, "validation_error", message, errors)


def install(app: FastAPI) -> None:
    @app.exception_handler(CortexError)
    async def _cortex(_: Request, exc: CortexError) -> JSONResponse:
        retry = exc.retry_after_s if isinstance(exc, QuotaExceeded) else None
        headers = {"Retry-After": str(retry)} if retry is not None else None
        return error_response(_status_of(exc), exc.code, exc.message, exc.details, headers=headers)

    @app.exception_handler(RateLimited)
    async def _rate_limited(_: Request, exc: RateLimited) -> JSONResponse:
        return error_response(
            429, exc.code, exc.message, exc.details, headers={"Retry-After": str(exc.retry_after_s)}
        )

    @app.exception_handler(BudgetExhausted)
    async def _budget(_: Request, exc: BudgetExhausted) -> JSONResponse:
        return error_response(402, exc.code, exc.message, exc.details)

    @app.exception_handler(UserRateLimited)
    async def _user_rate(_: Request, exc: UserRateLimited) -> JSONResponse:
        return error_response(
            429, exc.code, exc.message, exc.details, headers={"Retry-After": str(exc.retry_after_s)}
        )

    app.add_exception_handler(RequestValidationError, _validation)

    @app.exception_handler(HTTPException)
    async def _http(_: Request, exc: HTTPException) -> JSONResponse:
        code = STATUS_CODES.get(exc.status_code, "error")
        message = exc.detail if isinstance(exc.detail, str) else code.replace("_", " ")
        return error_response(
            exc.status_code, code, message, headers=dict(exc.headers) if exc.headers else None
        )

    async def _unavailable(_: Request, exc: Exception) -> JSONResponse:
        log.warning("dependency unavailable: %s", type(exc).__name__)
        return error_response(
            503,
            "unavailable",
            "a backing service (database or Redis) is unavailable; retry soon",
            headers={"Retry-After": "5"},
        )

    for exc_type in (
        OperationalError,
        InterfaceError,
        PoolTimeout,
        RedisConnectionError,
        RedisTimeoutError,
    ):
        app.add_exception_handler(exc_type, _unavailable)

    @app.exception_handler(Exception)
    async def _internal(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error")
        return error_response(500, "internal_error", "an internal error occurred; it was logged")
