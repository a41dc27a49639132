"""Retention: finished turns (with their steps, messages and tool calls) and audit rows older
than their tenant's `[retention]` days are deleted, in small batches, by a beat job
(`cortex.maintenance.apply_retention`) or once by `cortex-workers retention`. Streams keep
their own expiry (`CORTEX_STREAM_TTL_S`). See docs/retention.md.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from ..runtime import Runtime, get_runtime
from ..settings import Settings
from ..store import retention as store
from ..store.db import transaction
from ..store.repo import now

log = logging.getLogger(__name__)


def days_for(settings: Settings, tenant: str) -> float | None:
    """The tenant's retention in days: its `[retention.tenants.NAME]` table when there is one
    (no `days` there: forever), else `[retention].days`; None keeps everything."""
    override = settings.retention_tenants.get(tenant)
    if override is not None:
        return override.days
    return settings.retention_days


@dataclass(frozen=True, slots=True)
class Deleted:
    tenant: str
    turns: int
    decisions: int


def due(rt: Runtime | None = None, *, at: datetime | None = None) -> list[store.Due]:
    """What a run would delete now, per tenant with a retention (the dry run)."""
    rt = rt or get_runtime()
    moment = at or now()
    found = []
    with transaction(rt.db) as db:
        for tenant_id, name in store.tenants(db):
            days = days_for(rt.settings, name)
            if days is not None:
                cutoff = moment - timedelta(days=days)
                found.append(store.count_due(db, tenant_id, name, cutoff))
    return found


def _in_batches(
    rt: Runtime, delete: Callable[..., int], tenant_id: uuid.UUID, cutoff: datetime
) -> int:
    """Run `delete` batch after batch, each its own transaction, until one comes back short."""
    total, batch = 0, rt.settings.retention_batch
    while True:
        with transaction(rt.db) as db:
            n = delete(db, tenant_id, cutoff, batch=batch)
        total += n
        if n < batch:
            return total


def apply_retention(rt: Runtime | None = None, *, at: datetime | None = None) -> list[Deleted]:
    """Delete what is due, tenant by tenant, one small transaction per batch."""
    rt = rt or get_runtime()
    moment = at or now()
    with transaction(rt.db) as db:
        every = store.tenants(db)
    done = []
    for tenant_id, name in every:
        days = days_for(rt.settings, name)
        if days is None:
            continue
        cutoff = moment - timedelta(days=days)
        turns = _in_batches(rt, store.delete_turns_batch, tenant_id, cutoff)
        decisions = _in_batches(rt, store.delete_decisions_batch, tenant_id, cutoff)
        if turns or decisions:
            log.info("retention: %s: deleted %d turns, %d audit rows", name, turns, decisions)
        done.append(Deleted(name, turns, decisions))
    return done
