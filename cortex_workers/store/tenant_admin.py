"""Operators' SQL: tenants with their budget and mode overrides, API keys listed, revoked and
their last use recorded."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session as Db

from ..vocabulary import LlmMode
from .models import ApiKey, Tenant


@dataclass(frozen=True, slots=True)
class TenantOverrides:
    """A tenant's own limits and mode (None: the configured value applies)."""

    daily_usd_limit_micros: int | None = None
    per_user_hourly_limit: int | None = None
    session_token_cap: int | None = None
    mode: LlmMode | None = None


@dataclass(frozen=True, slots=True)
class TenantRow:
    id: uuid.UUID
    name: str
    created_at: datetime
    overrides: TenantOverrides


@dataclass(frozen=True, slots=True)
class KeyRow:
    id: uuid.UUID
    tenant: str
    prefix: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None


def _row(t: Tenant) -> TenantRow:
    return TenantRow(
        t.id,
        t.name,
        t.created_at,
        TenantOverrides(
            t.daily_usd_limit_micros, t.per_user_hourly_limit, t.session_token_cap, t.mode
        ),
    )


def create_tenant(db: Db, name: str) -> TenantRow | None:
    """A new tenant called `name`; None when one exists already."""
    created = db.execute(
        insert(Tenant)
        .values(id=uuid.uuid4(), name=name)
        .on_conflict_do_nothing()
        .returning(Tenant.id)
    ).first()
    if created is None:
        return None
    return get_tenant(db, name)


def get_tenant(db: Db, name: str) -> TenantRow | None:
    tenant = db.execute(select(Tenant).where(Tenant.name == name)).scalar_one_or_none()
    return _row(tenant) if tenant is not None else None


def list_tenants(db: Db) -> list[TenantRow]:
    return [_row(t) for t in db.execute(select(Tenant).order_by(Tenant.name)).scalars()]


def set_overrides(db: Db, name: str, changes: dict[str, int | LlmMode | None]) -> bool:
    """Change the named overrides of tenant `name` (a None value clears one); False when
    there is no such tenant."""
    done = db.execute(
        update(Tenant).where(Tenant.name == name).values(**changes).returning(Tenant.id)
    ).first()
    return done is not None


def overrides_of(db: Db, tenant_id: uuid.UUID) -> TenantOverrides:
    tenant = db.get(Tenant, tenant_id)
    return _row(tenant).overrides if tenant is not None else TenantOverrides()


def list_keys(db: Db, tenant: str | None = None) -> list[KeyRow]:
    query = (
        select(ApiKey, Tenant.name)
        .join(Tenant, Tenant.id == ApiKey.tenant_id)
        .order_by(ApiKey.created_at)
    )
    if tenant is not None:
        query = query.where(Tenant.name == tenant)
    return [
        KeyRow(k.id, name, k.prefix, k.created_at, k.last_used_at, k.revoked_at)
        for k, name in db.execute(query).all()
    ]


def revoke_key(db: Db, key_id: uuid.UUID) -> bool:
    """Revoke the key; False when there is no such key or it was revoked already."""
    done = db.execute(
        update(ApiKey)
        .where(ApiKey.id == key_id, ApiKey.revoked_at.is_(None))
        .values(revoked_at=text("now()"))
        .returning(ApiKey.id)
    ).first()
    return done is not None


USE_RECORD_EVERY_S = 60


def record_use(db: Db, key_prefix: str, tenant_id: uuid.UUID) -> None:
    """Note that a key was used: at most once a minute per key (the row is written only when
    its last use is older than that)."""
    db.execute(
        text(
            "UPDATE api_keys SET last_used_at = now() "
            "WHERE prefix = :prefix AND tenant_id = :tenant_id AND revoked_at IS NULL "
            "AND (last_used_at IS NULL OR last_used_at < now() - make_interval(secs => :every))"
        ),
        {"prefix": key_prefix, "tenant_id": tenant_id, "every": USE_RECORD_EVERY_S},
    )
