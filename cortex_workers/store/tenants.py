"""Tenants and their API keys (only hashes are stored; lookups compare in constant time)."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import uuid

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session as Db

from .models import ApiKey, Tenant

KEY_PREFIX = "cwk"


def _hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def ensure_tenant(db: Db, name: str) -> Tenant:
    """The tenant called `name`, created if missing."""
    db.execute(insert(Tenant).values(id=uuid.uuid4(), name=name).on_conflict_do_nothing())
    return db.execute(select(Tenant).where(Tenant.name == name)).scalar_one()


def create_api_key(db: Db, tenant_id: uuid.UUID) -> str:
    """A new key for the tenant; only its hash is stored, so this is the one chance to see it."""
    prefix = secrets.token_hex(4)
    key = f"{KEY_PREFIX}_{prefix}_{secrets.token_urlsafe(32)}"
    db.add(ApiKey(tenant_id=tenant_id, prefix=prefix, key_hash=_hash_key(key)))
    db.flush()
    return key


def tenant_for_key(db: Db, key: str) -> uuid.UUID | None:
    """The tenant owning `key`, comparing hashes in constant time."""
    parts = key.split("_", 2)
    if len(parts) != 3 or parts[0] != KEY_PREFIX:
        return None
    candidate = _hash_key(key)
    rows = db.execute(
        select(ApiKey.tenant_id, ApiKey.key_hash).where(
            ApiKey.prefix == parts[1], ApiKey.revoked_at.is_(None)
        )
    ).all()
    for tenant_id, key_hash in rows:
        if hmac.compare_digest(key_hash, candidate):
            return tenant_id
    return None
