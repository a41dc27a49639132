"""Opaque, signed pagination cursors: the model passes them back; it cannot forge or move them.

A cursor binds a tool's page state to the tool and the session it was issued in, with an
HMAC-SHA256 over both; a changed byte, another tool or another session is refused.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

from ..messages import JsonObject


class CursorError(ValueError):
    """The cursor was not issued by this tool in this session, or was altered."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _mac(key: bytes, tool: str, session_id: str, payload: bytes) -> bytes:
    scope = f"{tool}\x00{session_id}\x00".encode()
    return hmac.new(key, scope + payload, hashlib.sha256).digest()[:18]


def seal_cursor(state: JsonObject, *, key: bytes, tool: str, session_id: str) -> str:
    payload = json.dumps(state, separators=(",", ":"), sort_keys=True).encode()
    return f"{_b64(payload)}.{_b64(_mac(key, tool, session_id, payload))}"


def open_cursor(token: str, *, key: bytes, tool: str, session_id: str) -> JsonObject:
    """The state sealed in `token`; CursorError if it is not genuine."""
    refusal = CursorError(
        "invalid cursor: pass next_cursor exactly as the previous call "
        "returned it, or omit it for the first page"
    )
    body, sep, mac = token.partition(".")
    if not sep or len(token) > 4096:
        raise refusal
    try:
        payload, given = _unb64(body), _unb64(mac)
    except ValueError:
        raise refusal from None
    if not hmac.compare_digest(given, _mac(key, tool, session_id, payload)):
        raise refusal
    state = json.loads(payload)
    if not isinstance(state, dict):
        raise refusal
    return state
