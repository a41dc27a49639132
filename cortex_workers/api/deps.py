"""Request dependencies: the process runtime and the caller's tenant."""

from __future__ import annotations

import hashlib
import time
import uuid
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Header, Request
from fastapi.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from ..errors import NotFound
from ..runtime import Runtime, get_runtime
from ..store import tenant_admin, tenants
from ..store.db import transaction
from ..vocabulary import TokenScope
from .session_tokens import InvalidToken, SessionGrant, looks_like_token, verify

_CACHE_TTL_S = 2.0
"""A revoked key is refused by every API process within this long."""
_key_cache: dict[str, tuple[uuid.UUID, float]] = {}
_USE_EVERY_S = float(tenant_admin.USE_RECORD_EVERY_S)
_last_use_noted: dict[str, float] = {}


async def runtime() -> Runtime:
    """Async so that FastAPI calls it on the event loop, not through the thread pool."""
    return get_runtime()


RuntimeDep = Annotated[Runtime, Depends(runtime)]


def _unauthorized(message: str) -> HTTPException:
    return HTTPException(401, message, headers={"WWW-Authenticate": "Bearer"})


def _lookup(rt: Runtime, key: str) -> uuid.UUID | None:
    """The key's tenant; its last use is written at most once a minute per key."""
    with transaction(rt.db) as db:
        tenant_id = tenants.tenant_for_key(db, key)
        now = time.monotonic()
        if tenant_id is not None and _last_use_noted.get(key[:13], 0.0) <= now:
            tenant_admin.record_use(db, key.split("_", 2)[1], tenant_id)
            if len(_last_use_noted) > 10_000:
                _last_use_noted.clear()
            _last_use_noted[key[:13]] = now + _USE_EVERY_S
        return tenant_id


def _bearer(authorization: str | None, request: Request) -> str:
    """The bearer credential; 401 when missing or malformed."""
    if not authorization:
        if "token" in request.query_params:
            raise _unauthorized(
                "?token= is accepted only by the two event streams; "
                "send Authorization: Bearer <token> here"
            )
        raise _unauthorized("missing Authorization: Bearer <api key>")
    scheme, _, credential = authorization.partition(" ")
    credential = credential.strip()
    if scheme.lower() != "bearer" or not credential or len(credential) > 400:
        raise _unauthorized("use Authorization: Bearer <api key>")
    return credential


async def tenant(
    rt: RuntimeDep, request: Request, authorization: Annotated[str | None, Header()] = None
) -> uuid.UUID:
    """The tenant of the bearer key; 401 when missing or unknown, or a session token."""
    key = _bearer(authorization, request)
    if looks_like_token(key):
        raise _unauthorized("a session token cannot use this route; it needs the tenant's API key")
    return await _tenant_of_key(rt, key)


async def tenant_of_key(rt: Runtime, key: str) -> uuid.UUID:
    """The tenant of an API key; HTTPException 401 when it is unknown, revoked or malformed."""
    if looks_like_token(key) or not key:
        raise _unauthorized("use Authorization: Bearer <api key>")
    return await _tenant_of_key(rt, key)


async def _tenant_of_key(rt: Runtime, key: str) -> uuid.UUID:
    if len(key) > 200:
        raise _unauthorized("use Authorization: Bearer <api key>")
    digest = hashlib.sha256(key.encode()).hexdigest()
    cached = _key_cache.get(digest)
    if cached and cached[1] > time.monotonic():
        return cached[0]
    tenant_id = await run_in_threadpool(_lookup, rt, key)
    if tenant_id is None:
        raise _unauthorized("unknown or revoked API key")
    if len(_key_cache) > 10_000:
        _key_cache.clear()
    _key_cache[digest] = (tenant_id, time.monotonic() + _CACHE_TTL_S)
    return tenant_id


key_tenant = _tenant_of_key
"""The tenant of an API key (cached a few seconds); `HTTPException` 401 once revoked."""

TenantDep = Annotated[uuid.UUID, Depends(tenant)]


@dataclass(frozen=True, slots=True)
class Caller:
    """Who calls: a tenant's API key (`grant` None, every session of the tenant) or a session
    token (`grant`: one session, read or chat)."""

    tenant_id: uuid.UUID
    grant: SessionGrant | None = None

    def sees(self, session_id: uuid.UUID) -> bool:
        return self.grant is None or self.grant.session_id == session_id

    def require_read(self, session_id: uuid.UUID, what: str) -> None:
        """404 (as for another tenant's ids) when a token of another session asks."""
        if not self.sees(session_id):
            raise NotFound(f"{what} not found")

    def require_chat(self, session_id: uuid.UUID, what: str) -> None:
        """As `require_read`, and 403 for a `read` token."""
        self.require_read(session_id, what)
        if self.grant is not None and self.grant.scope != TokenScope.CHAT:
            raise HTTPException(403, "this session token may only read; a chat token may act")


def _grant(rt: Runtime, token: str) -> SessionGrant:
    secret = rt.settings.session_token_secret()
    if secret is None:
        raise _unauthorized("session tokens are off here (no CORTEX_TOKEN_SECRET)")
    try:
        return verify(secret, token)
    except InvalidToken as exc:
        raise _unauthorized(str(exc)) from None


async def _caller_of(rt: Runtime, credential: str) -> Caller:
    if looks_like_token(credential):
        grant = _grant(rt, credential)
        return Caller(grant.tenant_id, grant)
    return Caller(await _tenant_of_key(rt, credential))


async def caller(
    rt: RuntimeDep, request: Request, authorization: Annotated[str | None, Header()] = None
) -> Caller:
    """The tenant's API key or a session token, from `Authorization: Bearer`."""
    return await _caller_of(rt, _bearer(authorization, request))


async def stream_caller(
    rt: RuntimeDep, request: Request, authorization: Annotated[str | None, Header()] = None
) -> Caller:
    """As `caller`, or a session token in `?token=` (`EventSource` cannot send headers)."""
    token = request.query_params.get("token")
    if not authorization and token is not None:
        if not looks_like_token(token):
            raise _unauthorized("?token= takes a session token, never an API key")
        grant = _grant(rt, token)
        return Caller(grant.tenant_id, grant)
    return await _caller_of(rt, _bearer(authorization, request))


CallerDep = Annotated[Caller, Depends(caller)]
StreamCallerDep = Annotated[Caller, Depends(stream_caller)]
