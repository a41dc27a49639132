"""Request dependencies: the process runtime and the caller's tenant."""

from __future__ import annotations

import hashlib
import time
import uuid
from typing import Annotated

from fastapi import Depends, Header
from fastapi.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from ..runtime import Runtime, get_runtime
from ..store import tenant_admin, tenants
from ..store.db import transaction

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


async def tenant(
    rt: RuntimeDep, authorization: Annotated[str | None, Header()] = None
) -> uuid.UUID:
    """The tenant of the bearer key; 401 when missing or unknown."""
    if not authorization:
        raise _unauthorized("missing Authorization: Bearer <api key>")
    scheme, _, key = authorization.partition(" ")
    key = key.strip()
    if scheme.lower() != "bearer" or not key or len(key) > 200:
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


TenantDep = Annotated[uuid.UUID, Depends(tenant)]
