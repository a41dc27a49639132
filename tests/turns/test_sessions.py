"""Creating a session in the domain: what is refused, and what comes back."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import func, select

from cortex_workers.errors import InvalidRequest
from cortex_workers.runtime import get_runtime
from cortex_workers.store import tenants
from cortex_workers.store.db import transaction
from cortex_workers.store.models import Session
from cortex_workers.turns.sessions import SessionSpec, create_session


@pytest.fixture
def tenant_id(tenant_key: str) -> uuid.UUID:
    with transaction(get_runtime().db) as db:
        tenant = tenants.tenant_for_key(db, tenant_key)
    assert tenant is not None
    return tenant


def _sessions_of(tenant_id: uuid.UUID) -> int:
    with transaction(get_runtime().db) as db:
        query = select(func.count()).select_from(Session).where(Session.tenant_id == tenant_id)
        return int(db.execute(query).scalar_one())


def test_a_new_session_comes_back_with_every_column_loaded(tenant_id: uuid.UUID) -> None:
    spec = SessionSpec(name="support", tools=["calculate"], metadata={"team": "blue"})
    session = create_session(get_runtime(), tenant_id, spec)
    # read after the commit, outside any transaction: nothing is left to load lazily
    assert session.tenant_id == tenant_id
    assert session.name == "support" and session.tools == ["calculate"]
    assert session.metadata_ == {"team": "blue"}
    assert session.summary == "" and session.summary_upto_seq == 0
    assert session.created_at is not None
    assert _sessions_of(tenant_id) == 1


@pytest.mark.parametrize(
    ("spec", "code"),
    [
        (SessionSpec(provider="no-such-provider"), "unknown_provider"),
        (SessionSpec(tools=["calculate", "rm_rf"]), "unknown_tool"),
    ],
    ids=["provider", "tool"],
)
def test_an_unknown_provider_or_tool_is_refused_and_stores_nothing(
    tenant_id: uuid.UUID, spec: SessionSpec, code: str
) -> None:
    with pytest.raises(InvalidRequest) as refused:
        create_session(get_runtime(), tenant_id, spec)
    assert refused.value.code == code
    assert _sessions_of(tenant_id) == 0
