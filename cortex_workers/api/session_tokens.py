"""Session tokens: signed, expiring grants to one session of a tenant, for front ends.

A token is `cwt_<payload>.<signature>`: the payload (base64url JSON: tenant, session, scope,
expiry) signed with HMAC-SHA256 under a key derived per tenant from the deployment's token
secret (`CORTEX_TOKEN_SECRET`). Nothing is stored: every API process holding the same secret
verifies every token, and a token ends when it expires (rotate the secret to end them all).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
import uuid
from dataclasses import dataclass

from ..vocabulary import TokenScope

PREFIX = "cwt_"
MAX_TOKEN_CHARS = 400


@dataclass(frozen=True, slots=True)
class SessionGrant:
    """What a valid session token allows."""

    tenant_id: uuid.UUID
    session_id: uuid.UUID
    scope: TokenScope
    expires_at: int
    """Unix seconds."""


class InvalidToken(Exception):
    """Not a token this deployment signed, or expired: the message says which."""


def looks_like_token(credential: str) -> bool:
    return credential.startswith(PREFIX)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _tenant_key(secret: bytes, tenant_id: uuid.UUID) -> bytes:
    return hmac.new(secret, b"cortex-session-token:" + tenant_id.bytes, hashlib.sha256).digest()


def _signature(secret: bytes, tenant_id: uuid.UUID, payload: str) -> str:
    return _b64(hmac.new(_tenant_key(secret, tenant_id), payload.encode(), hashlib.sha256).digest())


def sign(secret: bytes, grant: SessionGrant) -> str:
    """The token carrying `grant`."""
    body = {
        "t": str(grant.tenant_id),
        "s": str(grant.session_id),
        "sc": str(grant.scope),
        "exp": grant.expires_at,
    }
    payload = _b64(json.dumps(body, separators=(",", ":")).encode())
    return f"{PREFIX}{payload}.{_signature(secret, grant.tenant_id, payload)}"


def _decode(payload: str) -> SessionGrant:
    try:
        body = json.loads(_unb64(payload))
        return SessionGrant(
            tenant_id=uuid.UUID(body["t"]),
            session_id=uuid.UUID(body["s"]),
            scope=TokenScope(body["sc"]),
            expires_at=int(body["exp"]),
        )
    except (ValueError, KeyError, TypeError, binascii.Error) as exc:
        raise InvalidToken("malformed session token") from exc


def verify(secret: bytes, token: str, *, now: float | None = None) -> SessionGrant:
    """The grant of a token signed with `secret` and not expired; else `InvalidToken`."""
    if not looks_like_token(token) or len(token) > MAX_TOKEN_CHARS:
        raise InvalidToken("not a session token")
    payload, dot, signature = token[len(PREFIX) :].partition(".")
    if not dot:
        raise InvalidToken("malformed session token")
    grant = _decode(payload)
    expected = _signature(secret, grant.tenant_id, payload)
    if not hmac.compare_digest(expected.encode(), signature.encode()):
        raise InvalidToken("session token signature does not match")
    if grant.expires_at <= (time.time() if now is None else now):
        raise InvalidToken("session token expired; ask for a new one")
    return grant
