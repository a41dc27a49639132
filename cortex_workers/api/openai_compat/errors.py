"""OpenAI's error shape on the OpenAI-compatible routes.

Every error of `/v1/responses`, `/v1/conversations` and `/v1/models` answers
`{"error": {"message", "type", "param", "code"}}`, as the official SDK reads it: the product's
handlers answer in our own shape, and `OpenAIErrors` rewrites those answers on these paths (so
that authentication, body limits, rate limits and validation all read the same). A request
that failed validation answers 400, as OpenAI's API does, with `param` naming the field.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ...errors import CortexError

PREFIXES = ("/v1/responses", "/v1/conversations", "/v1/models")
ERROR_TYPES = {
    401: "authentication_error",
    402: "insufficient_quota",
    403: "permission_error",
    404: "invalid_request_error",
    429: "rate_limit_error",
}


class Unsupported(CortexError):
    """A field (or a value of it) this server does not implement: 400, naming it."""

    code = "unsupported_parameter"

    def __init__(self, param: str, message: str) -> None:
        super().__init__(message, details={"param": param})


class OpenAIBadRequest(CortexError):
    """A request OpenAI's API answers 400 to (with `param` when one field is at fault)."""

    code = "invalid_request"

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message, code=code, details={"param": param})


def is_openai_path(path: str) -> bool:
    return any(path == p or path.startswith(p + "/") for p in PREFIXES)


def _param(code: str, details: Any) -> str | None:
    if isinstance(details, dict) and isinstance(details.get("param"), str):
        return str(details["param"])
    if code == "validation_error" and isinstance(details, list) and details:
        loc = [str(p) for p in details[0].get("loc", [])]
        where = loc[1:] if loc and loc[0] in ("body", "query", "path", "header") else loc
        return ".".join(where) or None
    return None


def openai_error(status: int, body: bytes) -> tuple[int, bytes]:
    """Our error body as OpenAI's; a body that is not ours passes unchanged."""
    try:
        error = json.loads(body)["error"]
        code, message = str(error["code"]), str(error["message"])
    except (ValueError, KeyError, TypeError):
        return status, body
    status = 400 if status == 422 else status
    if code == "validation_error" or status >= 500:
        kind = "invalid_request_error" if status < 500 else "server_error"
    else:
        kind = ERROR_TYPES.get(status, "invalid_request_error")
    out = {
        "message": message,
        "type": kind,
        "param": _param(code, error.get("details")),
        "code": code,
    }
    return status, json.dumps({"error": out}).encode()


class OpenAIErrors:
    """Rewrite error answers on the OpenAI-compatible paths into OpenAI's shape."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not is_openai_path(scope["path"]):
            await self.app(scope, receive, send)
            return
        start: Message | None = None
        chunks: list[bytes] = []

        async def rewriting_send(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start" and message["status"] >= 400:
                start = message
                return
            if start is None:
                await send(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body"):
                return
            status, body = openai_error(start["status"], b"".join(chunks))
            headers = [(k, v) for k, v in start.get("headers", []) if k != b"content-length"]
            headers.append((b"content-length", str(len(body)).encode()))
            await send({**start, "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": body})

        await self.app(scope, receive, rewriting_send)
