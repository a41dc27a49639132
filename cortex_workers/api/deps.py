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
from ..store import tenants
from ..store.db import transaction

_CACHE_TTL_S = 30.0
_key_cache: dict[str, tuple[uuid.UUID, float]] = {}


async def runtime() -> Runtime:
    """Async so that FastAPI calls it on the event loop, not through the thread pool."""
    return get_runtime()


RuntimeDep = Annotated[Runtime, Depends(runtime)]


def _unauthorized(message: str) -> HTTPException:
    return HTTPException(401, message, headers={"WWW-Authenticate": "Bearer"})


def _lookup(rt: Runtime, key: str) -> uuid.UUID | None:
    with transaction(rt.db) as db:
        return tenants.tenant_for_key(db, key)


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
